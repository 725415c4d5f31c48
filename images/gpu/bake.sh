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

# Ubuntu-HPC keeps NVIDIA's CUDA repository, which ships nvidia-fabricmanager-580 and the driver's packages too,
# built against NVIDIA's driver versions rather than Ubuntu's. The driver's packages come from Ubuntu's archive
# (origin Ubuntu, the snapshot the bake reads), whatever version NVIDIA's repository offers (apt_preferences(5):
# the candidate is the version of highest pin priority; Ubuntu's at 900 wins over any other origin's 500).
NVIDIA_FROM_UBUNTU=/etc/apt/preferences.d/gpucluster-nvidia-from-ubuntu

prefer_ubuntu_nvidia_packages() {
  mkdir -p "${ROOT:-}/etc/apt/preferences.d"
  cat >"${ROOT:-}$NVIDIA_FROM_UBUNTU" <<'PREFERENCES'
Package: nvidia-* libnvidia-*
Pin: release o=Ubuntu
Pin-Priority: 900
PREFERENCES
}

# upstream_version <package>: the installed package's version without epoch or Debian revision (580.95.05).
upstream_version() {
  local version
  version=$(dpkg-query -W -f='${Version}' "$1") || die "$1 is not installed"
  version=${version#*:}
  echo "${version%-*}"
}

# check_gpu_versions: the driver, the nvidia module of every kernel the image can boot, the fabric manager and every
# CUDA toolkit the base image carries agree. A fabric manager of another version than the driver breaks CUDA on
# NVSwitch nodes; a toolkit newer than the driver's branch cannot run (CUDA_DRIVER_MINIMUMS, pins.env).
check_gpu_versions() {
  local driver fabric image kernel module manifest cuda major pair need=
  driver=$(upstream_version "nvidia-kernel-common-${NVIDIA_BRANCH}-server")
  fabric=$(upstream_version "nvidia-fabricmanager-${NVIDIA_BRANCH}")
  [ "$fabric" = "$driver" ] || die "nvidia-fabricmanager-${NVIDIA_BRANCH} is $fabric but the driver is $driver"
  for image in "${ROOT:-}"/boot/vmlinuz-*; do
    kernel=${image##*/vmlinuz-}
    module=$(modinfo -k "$kernel" -F version nvidia) || die "kernel $kernel has no nvidia module"
    [ "$module" = "$driver" ] || die "kernel $kernel's nvidia module is $module but the driver is $driver"
  done
  for manifest in "${ROOT:-}"/usr/local/cuda-*/version.json; do
    [ -f "$manifest" ] || continue
    cuda=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["cuda"]["version"])' "$manifest") ||
      die "$manifest holds no cuda.version"
    major=${cuda%%.*}
    need=
    for pair in $CUDA_DRIVER_MINIMUMS; do
      [ "${pair%%:*}" = "$major" ] && need=${pair#*:}
    done
    [ -n "$need" ] || die "CUDA $cuda (${manifest%/version.json}): no driver minimum known for CUDA $major"
    [ "${driver%%.*}" -ge "$need" ] || die "CUDA $cuda needs driver branch $need or later; the driver is $driver"
  done
  log "driver $driver: modules, fabric manager and CUDA toolkits agree"
}

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
  check_gpu_versions
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
  prefer_ubuntu_nvidia_packages
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
