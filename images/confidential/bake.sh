#!/bin/bash
# The confidential GPU image: Ubuntu 24.04 for confidential VMs with containerd 2, kubelet and kubeadm, NVIDIA's
# R580 open driver with Canonical's signed modules for the -azure-fde kernel, the kernel-crypto modprobe rule in the
# initramfs, NVIDIA's local GPU verifier, and the units that set the GPU's ready state and attest it on every boot
# before the kubelet starts. docs/confidential.md says why each step is what Azure/az-cgpu-onboarding does.
set -euo pipefail
# shellcheck source=../lib/bake.sh
. "$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/lib/bake.sh"

# Azure/az-cgpu-onboarding src/step-1-install-gpu-driver.sh installs nvidia-driver-<branch>-server-open with
# linux-modules-nvidia-<branch>-server-open-azure-fde since release 4.2.1 (4.1.3 did so on Ubuntu >= 24.04 with an
# fde kernel >= 6.14). Signed modules: confidential VMs boot with Secure Boot, where DKMS-built modules do not load.
CC_DRIVER_PACKAGES=(initramfs-tools "nvidia-driver-${NVIDIA_BRANCH}-server-open"
                    "linux-modules-nvidia-${NVIDIA_BRANCH}-server-open-azure-fde" python3-venv)
VERIFIER=/opt/gpucluster/gpu-verifier

install_cc_driver() {
  install_packages "${CC_DRIVER_PACKAGES[@]}"
  hold_packages "nvidia-driver-${NVIDIA_BRANCH}-server-open" "linux-modules-nvidia-${NVIDIA_BRANCH}-server-open-azure-fde"
  require_module_for_every_kernel nvidia
  # The persistence daemon's user, which the onboarding's unit override runs it as.
  id nvidia-persistenced >/dev/null || die "the driver packages created no nvidia-persistenced user"
}

# NVIDIA's local GPU verifier at the version the onboarding pins (GPU_VERIFIER_VERSION in pins.env).
install_verifier() {
  python3 -m venv "$VERIFIER"
  retry 5 "$VERIFIER/bin/pip" install --quiet --no-cache-dir "nv-local-gpu-verifier==${GPU_VERIFIER_VERSION}"
}

main() {
  wait_for_first_boot
  add_kubernetes_repository
  apt_update
  install_kubernetes
  install_acr_credential_provider
  install_cc_driver
  install_verifier
  require_package_files
  install_files
  # The LKCA modprobe rule (files/) must be in the initramfs the kernel loads nvidia from.
  update-initramfs -u -k all
  strip_sysctl_conf
  systemctl daemon-reload
  systemctl enable containerd.service kubelet.service nvidia-persistenced.service "$CC_GATE_UNIT"
  prepull_images
  disable_package_timers
  record_image
  finish
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  main "$@"
fi
