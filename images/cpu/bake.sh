#!/bin/bash
# The CPU image (CPU and system pools): Ubuntu 22.04 with containerd 2, kubelet and kubeadm, the kernel and sysctl
# settings every node needs, and the images the system pool's add-ons run. docs/images.md says what and why.
set -euo pipefail
# shellcheck source=../lib/bake.sh
. "$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/lib/bake.sh"

main() {
  wait_for_first_boot
  add_kubernetes_repository
  apt_update
  install_kubernetes
  finish_kubernetes_image
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  main "$@"
fi
