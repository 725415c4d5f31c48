#!/bin/bash
# The GPU image (InfiniBand pools): Ubuntu-HPC 22.04 with containerd 2, kubelet and kubeadm, the NVIDIA R580
# open driver with its fabric manager, one DCGM engine (the GPU operator's), and the kernel and sysctl settings
# every node needs. Built once by Azure VM Image Builder; docs/images.md says what and why.
set -euo pipefail
# shellcheck source=../lib/bake.sh
. "$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/lib/bake.sh"

# Ubuntu-HPC installs Docker from packages.microsoft.com (Azure/azhpc-images ubuntu/common/install_docker.sh at tag
# ubuntu-hpc-20241023: moby-engine, moby-cli, which bring moby-containerd, moby-runc, moby-tini and moby-buildx).
# moby-containerd and moby-runc declare Provides/Conflicts/Replaces containerd, containerd.io and runc
# (Azure/moby-packaging packages/moby-containerd/mapping_1_6.go and mapping_2_0.go, packages/moby-runc/mapping.go):
# Ubuntu's containerd cannot sit beside them, and a Kubernetes node runs no Docker. They go first, on purpose.
REMOVE_FIRST=(moby-engine moby-cli moby-buildx moby-compose moby-containerd moby-runc moby-tini)

# The base image's 560 feature-branch driver came from NVIDIA's .run installer (ubuntu/common/install_nvidiagpudriver.sh)
# and its fabric manager from a held .deb (install_nvidia_fabric_manager.sh); both are replaced by one R580 build.
OLD_FABRIC_MANAGER=(nvidia-fabricmanager-560)
GPU_DRIVER_PACKAGES=("nvidia-driver-${NVIDIA_BRANCH}-server-open" "nvidia-dkms-${NVIDIA_BRANCH}-server-open"
                     "nvidia-fabricmanager-${NVIDIA_BRANCH}")

replace_gpu_driver() {
  if [ -x /usr/bin/nvidia-uninstall ]; then
    /usr/bin/nvidia-uninstall --silent
  fi
  remove_packages "${OLD_FABRIC_MANAGER[@]}"
  # Ubuntu's R580 server build with open kernel modules (H100 needs them), built by DKMS for the image's own kernel
  # (Ubuntu-HPC holds linux-azure, so Canonical's precompiled modules for a newer kernel would not load). Ubuntu's
  # fabric manager depends on nvidia-kernel-common at the exact driver version, so apt keeps the two in step.
  install_packages "${GPU_DRIVER_PACKAGES[@]}"
  hold_packages "${GPU_DRIVER_PACKAGES[@]}"
  require_module_for_every_kernel nvidia
  systemctl enable nvidia-fabricmanager.service nvidia-persistenced.service
}

# One DCGM engine per node: the GPU operator's (dcgm.enabled, shared with its exporter and the health checks).
# Ubuntu-HPC enables the host's nvidia-dcgm (ubuntu/common/install_dcgm.sh): it would be a second engine.
disable_host_dcgm() {
  systemctl disable --now nvidia-dcgm.service || true
  systemctl mask nvidia-dcgm.service
}

main() {
  wait_for_first_boot
  add_kubernetes_repository
  apt_update
  remove_packages "${REMOVE_FIRST[@]}"
  install_kubernetes
  replace_gpu_driver
  disable_host_dcgm
  finish_kubernetes_image
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  main "$@"
fi
