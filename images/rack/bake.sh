#!/bin/bash
# The rack image (NVLink racks: ND GB300 v6, ND GB200 v6; NVIDIA Grace, arm64): Ubuntu-HPC 24.04 for
# Grace-Blackwell with containerd 2, kubelet and kubeadm, and the kernel and sysctl settings every node needs.
# Built once by Azure VM Image Builder on an Arm64 build VM; docs/rack-scale.md says what and why.
#
# The NVIDIA driver, IMEX and DOCA OFED stay the base image's: no Ubuntu or NVIDIA package list published for
# ubuntu-hpc 2404-gb names what they are per version, so the bake cannot pin a replacement it could check.
# The DRA driver for ComputeDomains needs driver >= 570.158: unverified for this base image (docs/rack-scale.md).
set -euo pipefail
# shellcheck source=../lib/bake.sh
. "$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/lib/bake.sh"

# As on the x86 GPU image: a Kubernetes node runs no Docker, and Microsoft's moby packages conflict with Ubuntu's
# containerd (Azure/moby-packaging packages/moby-containerd/mapping_2_0.go). Purged only where present.
REMOVE_FIRST=(moby-engine moby-cli moby-buildx moby-compose moby-containerd moby-runc moby-tini)

# One DCGM engine per node: the GPU operator's. The host's nvidia-dcgm, where the base image enables it, goes.
disable_host_dcgm() {
  systemctl disable --now nvidia-dcgm.service || true
  systemctl mask nvidia-dcgm.service
}

# IMEX runs in the ComputeDomain daemon's pods (NVIDIA's DRA driver), not as the host's service: masked, so
# neither the base image nor a package enables it (components/bootstrap/rack.py; the node boot checks it).
mask_host_imex() {
  systemctl disable --now nvidia-imex.service || true
  systemctl mask nvidia-imex.service
}

main() {
  wait_for_first_boot
  add_kubernetes_repository
  apt_update
  remove_packages "${REMOVE_FIRST[@]}"
  install_kubernetes
  disable_host_dcgm
  mask_host_imex
  finish_kubernetes_image
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  main "$@"
fi
