"""The confidential-GPU gate: on every boot, before the kubelet starts, the GPU must be in confidential-computing
(CC) mode, have its ready state set, and pass NVIDIA's attestation.

The confidential image carries the gate and its unit (images/confidential/bake.sh puts the files below in place):
the unit is `RequiredBy=kubelet.service` and ordered before it, so a GPU that fails never runs a pod, after the
first boot as after any reboot. Nothing is installed at boot: driver, modules, verifier and units are baked.

Sources (Azure/az-cgpu-onboarding, release V4.3.3):
- `src/nvidia-persistenced.override.conf`: the persistence daemon runs with `--uvm-persistence-mode` and sets the
  GPU ready state after it starts (`nvidia-smi conf-compute -srs 1`); both are lost at every reboot otherwise;
- `src/step-1-install-gpu-driver.sh`: the LKCA modprobe rule, the needrestart exclusion for nvidia-persistenced;
- `src/local_gpu_verifier`: `python -m verifier.cc_admin`, NVIDIA's local GPU verifier.
The verdict and the verifier's output stay in the node's journal (tag `gpucluster-cc`) and in
/var/log/gpucluster/gpu-attestation.log.
"""

from __future__ import annotations

from gpucluster.bootstrap.host_prep import RETRY_FUNCTION
from gpucluster.vocabulary import LABEL_ATTESTATION

LKCA_MODPROBE = "install nvidia /sbin/modprobe ecdsa_generic ecdh; /sbin/modprobe --ignore-install nvidia"
"""The driver's Linux-kernel-crypto (LKCA) needs these modules first (Azure/az-cgpu-onboarding `src/nvidia-lkca.conf`)."""
LKCA_FILE = "/etc/modprobe.d/nvidia-lkca.conf"
GPU_VERIFIER_VERSION = "2.7.3"
"""NVIDIA's local GPU verifier (nv-local-gpu-verifier on PyPI), pinned; baked into /opt/gpucluster/gpu-verifier."""
VERIFIER = "/opt/gpucluster/gpu-verifier"
GATE_PATH = "/usr/local/sbin/gpucluster-confidential-gpu-gate"
GATE_UNIT = "gpucluster-confidential-gate.service"
PERSISTENCED_OVERRIDE = "/etc/systemd/system/nvidia-persistenced.service.d/override.conf"
NEEDRESTART_FILE = "/etc/needrestart/conf.d/99-skip-nvidia-persistenced.conf"
ATTESTATION_LOG = "/var/log/gpucluster/gpu-attestation.log"
CC_ON_MARKER = "CC status: ON"
KUBELET_CLIENT_CERT = "/var/lib/kubelet/pki/kubelet-client-current.pem"
KUBELET_CONF = "/etc/kubernetes/kubelet.conf"


def persistenced_override() -> str:
    """Azure/az-cgpu-onboarding V4.3.3 `src/nvidia-persistenced.override.conf`, as published."""
    return ("[Service]\n"
            "# Fix runtime dir ownership to avoid \"Failed to open PID file: Permission denied\"\n"
            "ExecStartPre=/bin/mkdir -p /run/nvidia-persistenced\n"
            "ExecStartPre=/bin/chown nvidia-persistenced:nvidia-persistenced /run/nvidia-persistenced\n"
            "ExecStartPre=/bin/rm -f /run/nvidia-persistenced/nvidia-persistenced.pid\n\n"
            "# Override ExecStart from the packaged unit\n"
            "ExecStart=\n"
            "ExecStart=/usr/bin/nvidia-persistenced --user nvidia-persistenced --uvm-persistence-mode --verbose\n\n"
            "# Set ReadyState after daemon is up\n"
            "ExecStartPost=-/usr/bin/nvidia-smi conf-compute -srs 1\n")


def needrestart_conf() -> str:
    """needrestart must not restart the persistence daemon after a package update (the onboarding's step 1)."""
    return '$nrconf{"override_rc"}{"nvidia-persistenced.service"} = 0;\n'


def gate_unit() -> str:
    """Runs on every boot after the persistence daemon (ready state) and before the kubelet, which requires it."""
    return ("[Unit]\nDescription=gpucluster: confidential GPU gate (CC mode, attestation) before the kubelet\n"
            "Requires=nvidia-persistenced.service\nAfter=nvidia-persistenced.service network-online.target\n"
            "Wants=network-online.target\nBefore=kubelet.service\n\n"
            f"[Service]\nType=oneshot\nRemainAfterExit=yes\nExecStart={GATE_PATH}\nTimeoutStartSec=30min\n\n"
            "[Install]\nRequiredBy=kubelet.service\n")


def _label_function() -> list[str]:
    """Set this node's attestation label with its own kubelet credentials, once the node exists (on the first
    boot it does not: it registers with the label after the gate passes). The Node authorizer lets a kubelet
    patch its own Node; NodeRestriction refuses only kubernetes.io/k8s.io and node-restriction labels
    (kubernetes plugin/pkg/admission/noderestriction/admission.go), not gpucluster.io ones."""
    patch = '{"metadata":{"labels":{"' + LABEL_ATTESTATION + '":"%s"}}}'
    return [
        "label_attestation() {",
        f"  if [ ! -f {KUBELET_CONF} ] || [ ! -f {KUBELET_CLIENT_CERT} ]; then return 0; fi",
        "  local server node",
        f"  server=$(awk '$1 == \"server:\" {{print $2; exit}}' {KUBELET_CONF})",
        '  node=$(hostname | tr "[:upper:]" "[:lower:]")',
        f"  retry 5 curl -fsS --connect-timeout 10 --cacert /etc/kubernetes/pki/ca.crt --cert {KUBELET_CLIENT_CERT} "
        f"--key {KUBELET_CLIENT_CERT} -X PATCH -H 'Content-Type: application/merge-patch+json' "
        f"--data \"$(printf '{patch}' \"$1\")\" \"$server/api/v1/nodes/$node\" >/dev/null",
        "}",
    ]


def gate_script() -> str:
    """The gate, run by its unit on every boot: mark the node pending, check the -azure-fde kernel and the module,
    CC mode on, ready state set, a passing attestation, then mark it passed. Any failure exits non-zero and the
    kubelet does not start; the label stays pending (or the node never registers, on the first boot)."""
    return "\n".join([
        "#!/bin/bash",
        "set -euo pipefail",
        f"mkdir -p {ATTESTATION_LOG.rsplit('/', 1)[0]}",
        f"exec > >(tee -a {ATTESTATION_LOG} | logger -t gpucluster-cc) 2>&1",
        RETRY_FUNCTION,
        *_label_function(),
        'if ! label_attestation pending; then echo "gpucluster: could not mark the node pending; continuing"; fi',
        "kernel=$(uname -r)",
        'case "$kernel" in',
        "  *-azure-fde) ;;",
        '  *) echo "gpucluster: kernel $kernel is not the -azure-fde flavour the image carries modules for"; exit 1 ;;',
        "esac",
        "modprobe nvidia",
        "status=$(nvidia-smi conf-compute -f)",
        'echo "$status"',
        f'if ! grep -q "{CC_ON_MARKER}" <<<"$status"; then',
        '  echo "gpucluster: GPU confidential-computing mode is not ON; the kubelet will not start"',
        "  exit 1",
        "fi",
        # The verifier fetches NVIDIA's reference measurements and revocation status: a network fetch, so it
        # waits a random moment first and retries with jittered back-off.
        "sleep $((RANDOM % 30))",
        f"if ! retry 5 {VERIFIER}/bin/python -m verifier.cc_admin; then",
        '  echo "gpucluster: GPU attestation failed; the kubelet will not start"',
        "  exit 1",
        "fi",
        "nvidia-smi conf-compute -srs 1",
        'if ! label_attestation passed; then echo "gpucluster: could not mark the node passed; it stays pending"; fi',
        'echo "gpucluster: CC on, GPU attested, ready state set at $(date -u +%FT%TZ)"',
        "",
    ])
