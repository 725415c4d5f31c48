"""Boot steps of a confidential-GPU node: the GPU must be in confidential-computing (CC) mode and
pass NVIDIA's attestation before the node may join the cluster.

The gate runs before `kubeadm join`; when it fails the node never registers, so nothing can be
scheduled on a GPU that is not protected. The verdict and the verifier's output stay in the
node's journal (tag `gpucluster-cc`) and in /var/log/gpucluster/gpu-attestation.log.
"""

from __future__ import annotations

from components.bootstrap.taints import NodeTaint

NVIDIA_DRIVER_BRANCH = "570"
"""Open kernel modules are required for CC mode; the -azure modules match the CVM image's kernel."""
GPU_VERIFIER_VERSION = "2.7.3"
"""NVIDIA's local GPU verifier (nv-local-gpu-verifier on PyPI), pinned."""
GATE_PATH = "/usr/local/sbin/gpucluster-confidential-gpu-gate"
ATTESTATION_LOG = "/var/log/gpucluster/gpu-attestation.log"
CC_ON_MARKER = "CC status: ON"

LABEL_CONFIDENTIAL = "gpucluster.io/confidential"
LABEL_CC_MODE = "gpucluster.io/gpu-cc-mode"
LABEL_ATTESTATION = "gpucluster.io/gpu-attestation"
CONFIDENTIAL_LABELS = {LABEL_CONFIDENTIAL: "true", LABEL_CC_MODE: "on", LABEL_ATTESTATION: "passed"}
CONFIDENTIAL_TAINT = NodeTaint(LABEL_CONFIDENTIAL, "true", "NoSchedule")


def gate_script() -> str:
    """Install the open driver and the verifier, require CC on and a passing attestation, then set
    the GPU's ready state (in CC mode the GPU refuses work until it is set)."""
    return "\n".join([
        "#!/bin/bash",
        "set -euo pipefail",
        f"mkdir -p {ATTESTATION_LOG.rsplit('/', 1)[0]}",
        f"exec > >(tee -a {ATTESTATION_LOG} | logger -t gpucluster-cc) 2>&1",
        "export DEBIAN_FRONTEND=noninteractive",
        "apt-get update",
        f"apt-get install -y nvidia-driver-{NVIDIA_DRIVER_BRANCH}-server-open "
        f"linux-modules-nvidia-{NVIDIA_DRIVER_BRANCH}-server-open-azure python3-venv",
        "modprobe nvidia",
        "nvidia-persistenced --uvm-persistence-mode || true",
        "status=$(nvidia-smi conf-compute -f)",
        'echo "$status"',
        f'if ! grep -q "{CC_ON_MARKER}" <<<"$status"; then',
        '  echo "gpucluster: GPU confidential-computing mode is not ON; this node will not join"',
        "  exit 1",
        "fi",
        "python3 -m venv /opt/gpucluster/gpu-verifier",
        f"/opt/gpucluster/gpu-verifier/bin/pip install --quiet nv-local-gpu-verifier=={GPU_VERIFIER_VERSION}",
        "if ! /opt/gpucluster/gpu-verifier/bin/python -m verifier.cc_admin; then",
        '  echo "gpucluster: GPU attestation failed; this node will not join"',
        "  exit 1",
        "fi",
        "nvidia-smi conf-compute -srs 1",
        'echo "gpucluster: CC on, GPU attested, ready state set at $(date -u +%FT%TZ)"',
        "",
    ])
