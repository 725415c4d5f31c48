"""Certificates that renew on the running machine: a daily systemd timer and the script it runs (docs/pki.md).

Each machine re-issues its own certificates before they expire, from the CA key it carries, with no reimage:

- etcd members re-issue their server, peer and snapshot-client certificates from the etcd CA. etcd reads its
  certificate files again for each new TLS connection, so no restart is needed (e2e/tests/test_real_etcd.py shows
  it with a real etcd 3.5).
- API servers run `kubeadm certs renew all` for what kubeadm issued or can renew (its serving certificate,
  the kubelet and front-proxy client certificates, the kubeconfigs; with external etcd kubeadm leaves the etcd
  client certificate alone: `GetCertsWithoutEtcd`, kubernetes `cmd/kubeadm/app/phases/certs/certlist.go`),
  re-issue the etcd client certificate from the etcd CA, and restart the control-plane static pods, as
  kubeadm's docs ask after a renewal ("Certificate Management with kubeadm", Manual certificate renewal).

A certificate is re-issued for the same key, subject, names and usages (`openssl x509 -x509toreq
-copy_extensions copyall`, then `-req -copy_extensions copyall`, OpenSSL 3.0 `openssl-x509(1)`), checked
against its CA and its key before it replaces the old file. The timer waits up to 12 hours at random, so the
machines of one role do not restart together.
"""

from __future__ import annotations

RENEW_SCRIPT = "/usr/local/sbin/gpucluster-cert-renew"
SERVICE = "gpucluster-cert-renew.service"
TIMER = "gpucluster-cert-renew.timer"
RENEW_DAYS = 30
"""Renew this many days before expiry: the plan's own early-renewal window (components/azure/pki.py)."""
VALID_DAYS = 365

ETCD_PKI = "/etc/etcd/pki"
KUBEADM_CERTS = ("apiserver", "apiserver-kubelet-client", "front-proxy-client")
KUBECONFIGS = ("admin.conf", "super-admin.conf", "controller-manager.conf", "scheduler.conf")
STATIC_PODS = ("kube-apiserver", "kube-controller-manager", "kube-scheduler")

_REISSUE = r"""
fail() {
  echo "gpucluster: $*" >&2
  exit 1
}

# reissue CERT KEY CA_CERT CA_KEY: when CERT expires within the window, a new certificate for the same key,
# subject, names and usages from the CA, checked, then moved into place. Returns 0 when it renewed, 1 when not
# due. Every step checks its own result: `set -e` does not act inside a function called from `if` or `||`.
reissue() {
  local cert=$1 key=$2 ca=$3 ca_key=$4 work
  if openssl x509 -checkend "$RENEW_SECONDS" -noout -in "$cert" > /dev/null; then
    return 1
  fi
  work=$(mktemp -d) || fail "no temporary folder"
  openssl x509 -x509toreq -in "$cert" -signkey "$key" -copy_extensions copyall -out "$work/req.pem" \
    || fail "$cert: no request could be made from it with $key"
  openssl x509 -req -in "$work/req.pem" -CA "$ca" -CAkey "$ca_key" -set_serial "0x$(openssl rand -hex 16)" \
    -days "$VALID_DAYS" -sha256 -copy_extensions copyall -out "$work/cert.pem" 2> /dev/null \
    || fail "$cert: $ca_key did not sign the renewal"
  openssl verify -CAfile "$ca" "$work/cert.pem" > /dev/null || fail "$cert: the renewal does not chain to $ca"
  [ "$(openssl x509 -in "$work/cert.pem" -noout -pubkey)" = "$(openssl pkey -in "$key" -pubout)" ] \
    || fail "$cert: the renewal does not match $key"
  install -m 0644 "$work/cert.pem" "$cert.new" || fail "$cert.new: not written"
  mv -f "$cert.new" "$cert" || fail "$cert: not replaced"
  rm -rf "$work"
  echo "gpucluster: renewed $cert until $(openssl x509 -enddate -noout -in "$cert" | cut -d= -f2)"
  return 0
}
"""


def _header() -> list[str]:
    return ["#!/bin/bash", "set -euo pipefail", f"RENEW_SECONDS=$(({RENEW_DAYS} * 86400))",
            f"VALID_DAYS={VALID_DAYS}", _REISSUE.strip("\n")]


def etcd_renew_script() -> str:
    """The member's three certificates from the etcd CA it carries (`PKI` points the script elsewhere in tests)."""
    return "\n".join([
        *_header(),
        f"PKI=${{PKI:-{ETCD_PKI}}}",
        "for role in server peer client; do",
        '  reissue "$PKI/$role.crt" "$PKI/$role.key" "$PKI/ca.crt" "$PKI/ca.key" || true',
        "done",
        "",
    ])


def apiserver_renew_script() -> str:
    """`K8S` points the script at another folder than /etc/kubernetes in tests."""
    kubeconfigs = " ".join(KUBECONFIGS)
    certs = " ".join(KUBEADM_CERTS)
    return "\n".join([
        *_header(),
        "K8S=${K8S:-/etc/kubernetes}",
        "KUBE_PKI=$K8S/pki",
        "renewed=0",
        'if reissue "$KUBE_PKI/apiserver-etcd-client.crt" "$KUBE_PKI/apiserver-etcd-client.key" '
        '"$KUBE_PKI/etcd/ca.crt" "$KUBE_PKI/etcd/ca.key"; then',
        "  renewed=1",
        "fi",
        "due=0",
        f"for name in {certs}; do",
        '  openssl x509 -checkend "$RENEW_SECONDS" -noout -in "$KUBE_PKI/$name.crt" > /dev/null || due=1',
        "done",
        f"for conf in {kubeconfigs}; do",
        '  file=$K8S/$conf',
        '  [ -f "$file" ] || continue',
        "  awk '/client-certificate-data:/ {print $2}' \"$file\" | base64 -d | "
        'openssl x509 -checkend "$RENEW_SECONDS" -noout > /dev/null || due=1',
        "done",
        'if [ "$due" = 1 ]; then',
        '  kubeadm certs renew all --config "$K8S/kubeadm.yaml"',
        "  renewed=1",
        "fi",
        'if [ "$renewed" = 1 ]; then',
        "  # The static pods read their certificates and kubeconfigs at start: restart them one at a time.",
        '  mkdir -p "$K8S/manifests-restart"',
        f"  for pod in {' '.join(STATIC_PODS)}; do",
        '    mv "$K8S/manifests/$pod.yaml" "$K8S/manifests-restart/"',
        "    for _ in $(seq 1 60); do",
        '      if [ -z "$(crictl ps --name "^$pod\\$" -q)" ]; then break; fi',
        "      sleep 2",
        "    done",
        '    mv "$K8S/manifests-restart/$pod.yaml" "$K8S/manifests/"',
        "    for _ in $(seq 1 90); do",
        '      if [ -n "$(crictl ps --name "^$pod\\$" --state running -q)" ]; then break; fi',
        "      sleep 2",
        "    done",
        "  done",
        '  echo "gpucluster: control-plane certificates renewed, static pods restarted"',
        "fi",
        "",
    ])


def renewal_units() -> tuple[str, str]:
    """(service, timer): daily, up to 12 h late at random, caught up after downtime (`Persistent=`)."""
    service = ("[Unit]\nDescription=gpucluster: renew this machine's certificates before they expire\n\n"
               f"[Service]\nType=oneshot\nExecStart={RENEW_SCRIPT}\n")
    timer = ("[Unit]\nDescription=gpucluster: daily certificate renewal check\n\n"
             "[Timer]\nOnCalendar=daily\nRandomizedDelaySec=12h\nPersistent=true\n\n"
             "[Install]\nWantedBy=timers.target\n")
    return service, timer


def renewal_files(script: str) -> list[dict[str, str]]:
    """cloud-init write_files entries for the script and its units."""
    service, timer = renewal_units()
    return [{"path": RENEW_SCRIPT, "permissions": "0755", "content": script},
            {"path": f"/etc/systemd/system/{SERVICE}", "permissions": "0644", "content": service},
            {"path": f"/etc/systemd/system/{TIMER}", "permissions": "0644", "content": timer}]

