#!/bin/bash
# The etcd image: Ubuntu 22.04 with etcd, etcdctl and etcdutl at the version kubeadm pairs with the cluster's
# Kubernetes minor (pins.env). No container runtime: members run etcd as a systemd unit. docs/images.md.
set -euo pipefail
# shellcheck source=../lib/bake.sh
. "$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/lib/bake.sh"

ETCD_RELEASE="https://github.com/etcd-io/etcd/releases/download/v${ETCD_VERSION}"
ETCD_TARBALL="etcd-v${ETCD_VERSION}-linux-amd64.tar.gz"

# The release's own SHA256SUMS checks the tarball (etcd-io/etcd release assets publish both).
install_etcd() {
  local work
  work=$(mktemp -d)
  retry 5 curl -fsSL --connect-timeout 20 -o "$work/$ETCD_TARBALL" "$ETCD_RELEASE/$ETCD_TARBALL"
  retry 5 curl -fsSL --connect-timeout 20 -o "$work/SHA256SUMS" "$ETCD_RELEASE/SHA256SUMS"
  (cd "$work" && grep " $ETCD_TARBALL\$" SHA256SUMS | sha256sum --check --strict)
  tar -xzf "$work/$ETCD_TARBALL" -C /usr/local/bin --strip-components=1 --no-same-owner \
    --wildcards '*/etcd' '*/etcdctl' '*/etcdutl'
  rm -rf "$work"
  /usr/local/bin/etcd --version | grep -q "etcd Version: ${ETCD_VERSION}\$" || die "etcd is not ${ETCD_VERSION}"
}

main() {
  wait_for_first_boot
  install_etcd
  require_package_files
  install_files
  disable_package_timers
  record_image
  finish
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  main "$@"
fi
