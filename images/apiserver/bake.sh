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
  finish_kubernetes_image
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  main "$@"
fi
