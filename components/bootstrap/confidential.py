"""Boot steps of a confidential-GPU node: the GPU must be in confidential-computing (CC) mode and
pass NVIDIA's attestation before the node may join the cluster.

The gate runs before `kubeadm join`; when it fails the node never registers, so nothing can be
scheduled on a GPU that is not protected. The verdict and the verifier's output stay in the
node's journal (tag `gpucluster-cc`) and in /var/log/gpucluster/gpu-attestation.log.
"""

from __future__ import annotations

from components.bootstrap.host_prep import APT
from components.bootstrap.taints import NodeTaint

NVIDIA_DRIVER_BRANCH = "570"
"""Open kernel modules are required for CC mode. Microsoft's onboarding names 570.86.15 as the minimum driver
(Azure/az-cgpu-onboarding `src/step-1-install-gpu-driver.sh`)."""
MINIMUM_KERNEL = "6.8.0-1025-azure"
"""Azure/az-cgpu-onboarding `src/step-1-install-gpu-driver.sh` (`MINIMUM_KERNEL_VERSION`); older kernels are
upgraded and the VM reboots first (`src/step-0-prepare-kernel.sh`)."""
DRIVER_PACKAGES = (f"nvidia-driver-{NVIDIA_DRIVER_BRANCH}-server-open",
                   f"linux-modules-nvidia-{NVIDIA_DRIVER_BRANCH}-server-open-azure-fde")
"""Confidential VMs boot the `-azure-fde` kernel (full-disk encryption): its module package, not `-azure`'s."""
LKCA_MODPROBE = "install nvidia /sbin/modprobe ecdsa_generic ecdh; /sbin/modprobe --ignore-install nvidia"
"""The driver's Linux-kernel-crypto (LKCA) needs these modules first (Azure/az-cgpu-onboarding `src/nvidia-lkca.conf`)."""
LKCA_FILE = "/etc/modprobe.d/nvidia-lkca.conf"
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
    """Microsoft's onboarding sequence (Azure/az-cgpu-onboarding, steps 0-2), then the join gate: kernel at
    least the minimum (else upgrade and reboot; the boot unit runs again after the reboot), the LKCA modprobe
    rule in the initramfs, the open driver with the `-azure-fde` modules, CC mode on, a passing attestation,
    then the GPU's ready state (in CC mode the GPU refuses work until it is set)."""
    return "\n".join([
        "#!/bin/bash",
        "set -euo pipefail",
        f"mkdir -p {ATTESTATION_LOG.rsplit('/', 1)[0]}",
        f"exec > >(tee -a {ATTESTATION_LOG} | logger -t gpucluster-cc) 2>&1",
        "export DEBIAN_FRONTEND=noninteractive",
        f"{APT} update",
        "kernel=$(uname -r)",
        f'if ! printf "%s\\n%s\\n" "{MINIMUM_KERNEL}" "$kernel" | sort --check=quiet --version-sort; then',
        f'  echo "gpucluster: kernel $kernel is older than {MINIMUM_KERNEL}; upgrading and rebooting"',
        f"  {APT} -o APT::Get::Always-Include-Phased-Updates=true full-upgrade",
        "  systemctl reboot",
        "  exec sleep infinity",
        "fi",
        f"{APT} install initramfs-tools",
        f"echo '{LKCA_MODPROBE}' > {LKCA_FILE}",
        'update-initramfs -u -k "$kernel"',
        f"{APT} install {' '.join(DRIVER_PACKAGES)} python3-venv",
        "modprobe nvidia",
        "nvidia-persistenced --uvm-persistence-mode || true",
        "status=$(nvidia-smi conf-compute -f)",
        'echo "$status"',
        f'if ! grep -q "{CC_ON_MARKER}" <<<"$status"; then',
        '  echo "gpucluster: GPU confidential-computing mode is not ON; this node will not join"',
        "  exit 1",
        "fi",
        "python3 -m venv /opt/gpucluster/gpu-verifier",
        "/opt/gpucluster/gpu-verifier/bin/pip install --quiet --retries 10 --timeout 60 "
        f"nv-local-gpu-verifier=={GPU_VERIFIER_VERSION}",
        "if ! /opt/gpucluster/gpu-verifier/bin/python -m verifier.cc_admin; then",
        '  echo "gpucluster: GPU attestation failed; this node will not join"',
        "  exit 1",
        "fi",
        "nvidia-smi conf-compute -srs 1",
        'echo "gpucluster: CC on, GPU attested, ready state set at $(date -u +%FT%TZ)"',
        "",
    ])
