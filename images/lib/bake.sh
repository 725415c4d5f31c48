# shellcheck shell=bash
# Steps every node image's bake script shares. Sourced by images/<definition>/bake.sh, never run on its own.
#
# The bake runs once, on Azure VM Image Builder's build VM, as root. Everything a machine runs is put in
# place here; at boot a machine only configures itself (docs/images.md). The bundle Image Builder unpacks
# holds this file, the definition's bake.sh, pins.env, prepull.txt and files/ (rendered from the plan).

export DEBIAN_FRONTEND=noninteractive
BUNDLE=${BUNDLE:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
# shellcheck source=../pins.env
. "$BUNDLE/pins.env"

log() {
  echo "gpucluster-bake: $*"
}

die() {
  echo "gpucluster-bake: $*" >&2
  exit 1
}

# retry <attempts> <command...>: exponential back-off with full jitter (a random wait up to 2^n seconds,
# at most 5 minutes), so build VMs that fail together do not retry together.
retry() {
  local attempts=$1 n=1 cap
  shift
  until "$@"; do
    if [ "$n" -ge "$attempts" ]; then
      log "giving up after $n attempts: $*"
      return 1
    fi
    cap=$((1 << n))
    [ "$cap" -le 300 ] || cap=300
    log "attempt $n failed: $*; retrying"
    sleep $((RANDOM % cap + 1))
    n=$((n + 1))
  done
}

# apt-get as every step runs it. DPkg::Lock::Timeout waits for the dpkg frontend lock (apt.conf(5)); it does
# not cover /var/lib/apt/lists/lock, which `apt-get update` takes: apt_update waits for that one itself.
apt_get() {
  apt-get -o DPkg::Lock::Timeout=600 -o Acquire::Retries=5 -y "$@"
}

lists_unlocked() {
  ! fuser /var/lib/apt/lists/lock >/dev/null 2>&1
}

wait_for_apt_lists() {
  local waited=0
  until lists_unlocked; do
    [ "$waited" -lt 600 ] || die "/var/lib/apt/lists/lock held for 10 minutes"
    sleep 5
    waited=$((waited + 5))
  done
}

apt_update() {
  use_ubuntu_snapshot
  wait_for_apt_lists
  retry 5 apt_get update
}

SNAPSHOT_CONF=/etc/apt/apt.conf.d/50gpucluster-snapshot

# use_ubuntu_snapshot: Ubuntu's archive as it was at UBUNTU_SNAPSHOT (pins.env), through Ubuntu's snapshot service,
# so an exact version the catalogue pins (containerd's) stays installable after the archive moves on: a pocket's
# index keeps only its newest version. apt reads snapshots from 2.4.11 on 22.04, where the sources entries say
# `snapshot=yes`, and detects them itself on 24.04 (documentation.ubuntu.com/server/how-to/software/
# snapshot-service). Other repositories (pkgs.k8s.io, NVIDIA's) are read as they are.
use_ubuntu_snapshot() {
  local codename version
  # shellcheck source=/dev/null
  codename=$(. "${ROOT:-}/etc/os-release" && echo "$VERSION_CODENAME")
  version=$(dpkg-query -W -f='${Version}' apt) || die "apt is not installed"
  case "$codename" in
    jammy)
      dpkg --compare-versions "$version" ge 2.4.11 ||
        die "apt $version cannot read Ubuntu's snapshot service (22.04 needs apt 2.4.11 or later): use a newer base image"
      mark_snapshot_sources
      ;;
    noble) ;;
    *) die "no snapshot rule for Ubuntu $codename: add one to images/lib/bake.sh use_ubuntu_snapshot" ;;
  esac
  printf 'APT::Snapshot "%s";\n' "$UBUNTU_SNAPSHOT" >"${ROOT:-}$SNAPSHOT_CONF"
}

# mark_snapshot_sources: `snapshot=yes` on every one-line entry of Ubuntu's archive (archive, security and ports
# hosts, Azure's mirrors too), kept beside the entry's other options.
mark_snapshot_sources() {
  local list
  for list in "${ROOT:-}"/etc/apt/sources.list "${ROOT:-}"/etc/apt/sources.list.d/*.list; do
    [ -f "$list" ] || continue
    sed -i -E \
      -e '/snapshot=/b' \
      -e 's#^(deb(-src)?)[[:space:]]+\[([^]]*)\][[:space:]]+(https?://([a-z0-9.-]+\.)?ubuntu\.com/)#\1 [\3 snapshot=yes] \4#' \
      -e 's#^(deb(-src)?)[[:space:]]+(https?://([a-z0-9.-]+\.)?ubuntu\.com/)#\1 [snapshot=yes] \3#' \
      "$list"
  done
}

# require_snapshot_version <package> <version>: apt offers the pinned version from the snapshot service. Fails with
# what apt does offer when the snapshot predates the version or apt read the live archive instead.
require_snapshot_version() {
  local found
  found=$(apt-cache madison "$1" | awk -F'|' -v want="$2" '{
    gsub(/^ +| +$/, "", $2); gsub(/^ +| +$/, "", $3)
    if ($2 == want && $3 ~ /snapshot\.ubuntu\.com/) print $3 }')
  [ -n "$found" ] || die "$1 $2 is not offered from Ubuntu's snapshot at $UBUNTU_SNAPSHOT (apt-cache madison $1:" \
    "$(apt-cache madison "$1" | tr -s ' ' | paste -sd ';' -)): move UBUNTU_SNAPSHOT (components/catalog/node_images.py)" \
    "past the version's publication, or pin the version the snapshot has"
}

# Cloud-init and apt-daily run apt at the build VM's first boot: let them finish first.
wait_for_first_boot() {
  cloud-init status --wait >/dev/null || log "cloud-init reported an error; continuing"
  systemctl stop apt-daily.timer apt-daily-upgrade.timer unattended-upgrades.service || true
}

# remove_packages <package...>: purge those of them that are installed, in one transaction of its own.
remove_packages() {
  local -a installed=()
  local package
  for package in "$@"; do
    if dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'install ok installed'; then
      installed+=("$package")
    fi
  done
  if [ "${#installed[@]}" -gt 0 ]; then
    apt-mark unhold "${installed[@]}" >/dev/null
    apt_get purge "${installed[@]}"
  fi
}

# install_packages <package[=version]...>: one transaction that may not remove anything: what the image
# carries goes only by remove_packages, so apt's resolver never tears out a package to make room.
install_packages() {
  apt_get --no-remove install "$@"
}

hold_packages() {
  apt-mark hold "$@" >/dev/null
}

add_kubernetes_repository() {
  local key=/etc/apt/keyrings/kubernetes-apt-keyring.gpg
  local url="https://pkgs.k8s.io/core:/stable:/v${KUBERNETES_MINOR}/deb/"
  mkdir -p /etc/apt/keyrings
  retry 5 curl -fsSL --connect-timeout 20 -o /tmp/kubernetes-release.key "${url}Release.key"
  gpg --batch --yes --dearmor -o "$key" /tmp/kubernetes-release.key
  rm -f /tmp/kubernetes-release.key
  echo "deb [signed-by=$key] $url /" >/etc/apt/sources.list.d/kubernetes.list
}

# The Kubernetes packages of every Kubernetes image, pinned to the stack's version (pins.env).
KUBERNETES_PACKAGES=("containerd=${CONTAINERD_VERSION}" runc "kubelet=${KUBERNETES_VERSION}-*"
                     "kubeadm=${KUBERNETES_VERSION}-*")

install_kubernetes() {
  require_snapshot_version containerd "$CONTAINERD_VERSION"
  install_packages "${KUBERNETES_PACKAGES[@]}"
  hold_packages containerd runc kubelet kubeadm
}

# require_module_for_every_kernel <module>: every kernel the image can boot (a /boot/vmlinuz-*) has the module.
require_module_for_every_kernel() {
  local image kernel found=
  for image in "${ROOT:-}"/boot/vmlinuz-*; do
    kernel=${image##*/vmlinuz-}
    modinfo -k "$kernel" "$1" >/dev/null || die "kernel $kernel has no $1 module"
    found=1
  done
  [ -n "$found" ] || die "no kernel in /boot"
}

# install_files: files/ of the bundle, rendered from the plan, onto the image with their modes.
install_files() {
  local source mode target
  while read -r mode target; do
    source="$BUNDLE/files$target"
    [ -f "$source" ] || die "bundle has no files$target"
    install -D -m "$mode" "$source" "${ROOT:-}$target"
  done <"$BUNDLE/files.txt"
}

# require_package_files: every file package-files.txt (`<path> <package>`) names is on the image: the boot documents
# and the image's units run them (components/images/manifest.py checks the plan against this list).
require_package_files() {
  local path package
  while read -r path package; do
    [ -n "$path" ] || continue
    [ -e "${ROOT:-}$path" ] || die "$package installed no $path"
  done <"$BUNDLE/package-files.txt"
}

# strip_sysctl_conf: drop from /etc/sysctl.conf every key the image's own sysctl file sets. sysctl --system
# applies /etc/sysctl.conf after every /etc/sysctl.d file (procps sysctl.c PreloadSystem), and Ubuntu-HPC's
# tuning appends gc_thresh values to it (Azure/azhpc-images common/hpc-tuning.sh): left there, they win.
strip_sysctl_conf() {
  local conf="${ROOT:-}/etc/sysctl.conf" key
  [ -f "$conf" ] || return 0
  [ -f "${ROOT:-}$SYSCTL_FILE" ] || die "the image has no $SYSCTL_FILE"
  while IFS='= ' read -r key _; do
    case "$key" in '' | '#'*) continue ;; esac
    sed -i -E "/^[[:space:]]*${key//./\\.}[[:space:]]*=/d" "$conf"
  done <"${ROOT:-}$SYSCTL_FILE"
}

# prepull_images: every image in prepull.txt (`<upstream> <served>`) into containerd's k8s.io namespace, where the
# kubelet looks, under the name the cluster's manifests use (the registry's cache of the same upstream image).
prepull_images() {
  local image served
  systemctl start containerd
  while read -r image served; do
    [ -n "$image" ] || continue
    retry 5 ctr --namespace k8s.io images pull "$image" >/dev/null
    if [ -n "$served" ] && [ "$served" != "$image" ]; then
      ctr --namespace k8s.io images tag --force "$image" "$served" >/dev/null
    fi
    log "pulled $image as ${served:-$image}"
  done <"$BUNDLE/prepull.txt"
}

# Nothing changes the image's packages after the bake: unattended upgrades would move pinned drivers and runtimes.
disable_package_timers() {
  systemctl disable --now apt-daily.timer apt-daily-upgrade.timer || true
  systemctl mask unattended-upgrades.service
}

# The kubelet refuses a cgroup v1 host (its failCgroupV1, set in every KubeletConfiguration the cluster renders):
# an image that boots on v1 would never join, so it is not built. The build VM boots the base image's own kernel
# command line, as every machine made from the image will.
require_cgroup_v2() {
  local fs
  fs=$(stat -fc %T /sys/fs/cgroup)
  [ "$fs" = cgroup2fs ] || die "/sys/fs/cgroup is $fs, not cgroup2fs: boot the base image with cgroup v2 (systemd.unified_cgroup_hierarchy=1)"
}

# release_digest <release json> <asset>: the sha256 GitHub computed for the asset at upload (`assets[].digest`).
release_digest() {
  python3 -c '
import json, sys
assets = [a for a in json.load(open(sys.argv[1])).get("assets", []) if a.get("name") == sys.argv[2]]
digest = (assets[0].get("digest") or "") if assets else ""
print(digest[len("sha256:"):] if digest.startswith("sha256:") else "")
' "$1" "$2"
}

# install_release_binary <repository> <tag> <asset> <path>: a release asset, checked against the digest GitHub
# serves with the release (the release publishes no checksum file), installed executable at <path>. Sets
# RELEASE_DIGEST.
install_release_binary() {
  local repository=$1 tag=$2 asset=$3 path=$4 dir
  dir=$(mktemp -d)
  retry 5 curl -fsSL --connect-timeout 20 -o "$dir/release.json" \
    "https://api.github.com/repos/$repository/releases/tags/$tag"
  RELEASE_DIGEST=$(release_digest "$dir/release.json" "$asset")
  [ -n "$RELEASE_DIGEST" ] || die "release $repository $tag has no sha256 digest for $asset"
  retry 5 curl -fsSL --connect-timeout 20 -o "$dir/$asset" \
    "https://github.com/$repository/releases/download/$tag/$asset"
  echo "$RELEASE_DIGEST  $dir/$asset" | sha256sum -c --quiet - ||
    die "$asset does not match its release digest $RELEASE_DIGEST"
  install -D -m 0755 "$dir/$asset" "${ROOT:-}$path"
  rm -rf "$dir"
}

# The kubelet's image credential provider (every kubelet is started with it; it exits when the binary is missing).
install_acr_credential_provider() {
  install_release_binary "$ACR_PROVIDER_REPOSITORY" "$ACR_PROVIDER_TAG" "$ACR_PROVIDER_ASSET" "$ACR_PROVIDER_PATH"
  ACR_PROVIDER_SHA256=$RELEASE_DIGEST
  log "installed $ACR_PROVIDER_ASSET $ACR_PROVIDER_TAG (sha256 $ACR_PROVIDER_SHA256) as $ACR_PROVIDER_PATH"
}

# clear_containerd_drop_ins: containerd reads only the drop-ins the image renders. A base image's own (NVIDIA's
# `nvidia-ctk runtime configure --set-as-default` writes one) would make `nvidia` every pod's runtime; the GPU
# operator's toolkit adds its runtime in a drop-in of its own at run time, without making it the default while CDI
# is on (NVIDIA/gpu-operator v26.3.3 controllers/object_controls.go transformToolkitCtrForCDI).
clear_containerd_drop_ins() {
  local dropin
  for dropin in "${ROOT:-}"/etc/containerd/conf.d/*.toml; do
    [ -e "$dropin" ] || continue
    log "removing the base image's containerd drop-in ${dropin#"${ROOT:-}"}"
    rm -f "$dropin"
  done
}

# require_default_runtime <name>: containerd's merged configuration (its file and every drop-in it imports, as
# `containerd config dump` prints them) runs pods with <name> unless they name a RuntimeClass.
require_default_runtime() {
  local dump names
  dump=$(containerd --config "${ROOT:-}/etc/containerd/config.toml" config dump) || die "containerd config dump failed"
  names=$(printf '%s\n' "$dump" | sed -n -E "s/^[[:space:]]*default_runtime_name[[:space:]]*=[[:space:]]*['\"]([^'\"]*)['\"].*/\1/p" |
    sort -u)
  [ "$names" = "$1" ] || die "containerd's default runtime is '${names//$'\n'/ }', not $1: a drop-in under /etc/containerd/conf.d changes it"
}

# finish_kubernetes_image: what a Kubernetes node image ends with once its own packages are in: the kubelet's
# credential provider, the rendered files (and no base image drop-ins), runc as the default runtime, sysctls that
# win, containerd and the kubelet enabled, the pre-pulled images, no package timers, the record.
finish_kubernetes_image() {
  require_cgroup_v2
  install_acr_credential_provider
  require_package_files
  clear_containerd_drop_ins
  install_files
  require_default_runtime runc
  strip_sysctl_conf
  systemctl enable containerd.service kubelet.service
  prepull_images
  disable_package_timers
  record_image
  finish
}

# record_image: what this image holds, for `cat /etc/gpucluster/image` on any machine.
record_image() {
  mkdir -p /etc/gpucluster
  {
    echo "definition=$IMAGE_DEFINITION"
    echo "version=$IMAGE_VERSION"
    echo "bundle_sha256=$BUNDLE_SHA256"
    echo "ubuntu_snapshot=$UBUNTU_SNAPSHOT"
    if [ -n "${ACR_PROVIDER_SHA256:-}" ]; then
      echo "acr_credential_provider=$ACR_PROVIDER_TAG $ACR_PROVIDER_ASSET sha256:$ACR_PROVIDER_SHA256"
    fi
  } >/etc/gpucluster/image
  dpkg-query -W -f='${Package} ${Version}\n' >/etc/gpucluster/image-packages
}

finish() {
  rm -f "${ROOT:-}$SNAPSHOT_CONF" # a machine's own apt (if anyone runs it) reads the archive as it is
  apt-get clean
  rm -rf /var/lib/apt/lists/*
  log "done: $IMAGE_DEFINITION $IMAGE_VERSION"
}
