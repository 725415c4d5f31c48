#!/bin/bash
# The API-server image: Ubuntu 22.04 with containerd 2, kubelet and kubeadm, and the control-plane images kubeadm's
# static pods run, so `kubeadm init` at boot pulls nothing. docs/images.md says what and why.
set -euo pipefail
# shellcheck source=../lib/bake.sh
. "$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/lib/bake.sh"

main() {
  wait_for_first_boot
  add_kubernetes_repository
  apt_update
  install_kubernetes
  install_files
  strip_sysctl_conf
  systemctl enable containerd.service kubelet.service
  prepull_images
  disable_package_timers
  record_image
  finish
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  main "$@"
fi
