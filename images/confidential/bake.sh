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
# Not that rolling meta here: it depends on the modules of the archive's newest ABI, whose package depends on that
# ABI's kernel, so apt would add a kernel and leave the base image's own without a module (require_module_for_every_
# kernel stops the bake). The image takes the modules built for its own kernel's ABI and holds the kernel.
CC_DRIVER_PACKAGES=(initramfs-tools "nvidia-driver-${NVIDIA_BRANCH}-server-open" python3-venv)
VERIFIER=/opt/gpucluster/gpu-verifier

# cc_kernel_abi: the ABI of the one -azure-fde kernel the base image carries (the kernel the build VM booted).
cc_kernel_abi() {
  local -a kernels
  mapfile -t kernels < <(dpkg-query -W -f='${Package} ${Status}\n' 'linux-image-[0-9]*-azure-fde' 2>/dev/null |
    awk '$NF == "installed" {print $1}')
  [ "${#kernels[@]}" -eq 1 ] || die "expected one -azure-fde kernel on the base image, found ${#kernels[@]}: ${kernels[*]}"
  echo "${kernels[0]#linux-image-}"
}

# cc_transaction <package...>: the packages and Canonical's signed modules for the base kernel's ABI in one
# transaction; the modules and every installed kernel package held; then every kernel the image can boot has them.
cc_transaction() {
  local modules
  local -a kernel
  modules="linux-modules-nvidia-${NVIDIA_BRANCH}-server-open-$(cc_kernel_abi)"
  install_packages "$@" "$modules"
  mapfile -t kernel < <(dpkg-query -W -f='${Package} ${Status}\n' 'linux-*azure-fde*' 2>/dev/null |
    awk '$NF == "installed" {print $1}')
  hold_packages "$modules" "${kernel[@]}"
  require_module_for_every_kernel nvidia
}

install_cc_driver() {
  cc_transaction "${CC_DRIVER_PACKAGES[@]}"
  hold_packages "nvidia-driver-${NVIDIA_BRANCH}-server-open"
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
  clear_containerd_drop_ins
  install_files
  require_default_runtime runc
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
