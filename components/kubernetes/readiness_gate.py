"""A readiness gate that tolerates a share of unready nodes, in place of Helm's wait (components/kubernetes/objects/
releases.py): after the CNI's release, `pulumi up` waits until Cilium's agent is ready on at least
`MIN_READY_PERCENT` of the nodes it is scheduled on, then applies what needs pod networking. A gate that times out
fails `pulumi up` and uninstalls nothing.

Pure. The share is the cluster-autoscaler's own bound on a healthy cluster (`--max-total-unready-percentage`,
components/kubernetes/objects/autoscaler.py). The script runs where `pulumi up` runs, with bash and curl (as the
/readyz wait, planning/first_up.py), authenticated by the admin client certificate; it reads the DaemonSet's
`status.desiredNumberScheduled` and `status.numberReady` (apps/v1 DaemonSetStatus, always present).
"""

from __future__ import annotations

import base64
from dataclasses import dataclass

import yaml

from gpucluster.kubernetes.objects.autoscaler import MAX_UNREADY_PERCENT

MIN_READY_PERCENT = 100 - MAX_UNREADY_PERCENT
TIMEOUT_SECONDS = 1800

READINESS_SCRIPT = r"""#!/usr/bin/env bash
# Waits until a DaemonSet is ready on MIN_PERCENT of the nodes it is scheduled on (not all of them: a healthy
# cluster of thousands of nodes has some unready).
# Env: ENDPOINT (host:port), CA_PEM, CERT_PEM, KEY_PEM (admin client), NAMESPACE, NAME, MIN_PERCENT, TIMEOUT,
# PROXY (optional proxy URL).
set -euo pipefail
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
umask 077
printf '%s\n' "$CA_PEM" > "$dir/ca"
printf '%s\n' "$CERT_PEM" > "$dir/cert"
printf '%s\n' "$KEY_PEM" > "$dir/key"
proxy=()
if [ -n "${PROXY:-}" ]; then
  proxy=(--proxy "$PROXY")
fi
# kube-apiserver pretty-prints JSON for a User-Agent that starts with curl (the API server's negotiation,
# isPrettyPrint): a space may follow the colon.
field() {
  { grep -oE "\"$1\": *[0-9]+" <<< "$2" || true; } | head -n 1 | sed -E 's/.*: *//'
}
url="https://$ENDPOINT/apis/apps/v1/namespaces/$NAMESPACE/daemonsets/$NAME"
deadline=$((SECONDS + TIMEOUT))
while :; do
  body=$(curl --silent --fail --max-time 10 --cacert "$dir/ca" --cert "$dir/cert" --key "$dir/key" \
    ${proxy[@]+"${proxy[@]}"} "$url" || true)
  desired=$(field desiredNumberScheduled "$body")
  ready=$(field numberReady "$body")
  desired=${desired:-0}
  ready=${ready:-0}
  if [ "$desired" -gt 0 ] && [ $((ready * 100)) -ge $((desired * MIN_PERCENT)) ]; then
    echo "DaemonSet $NAMESPACE/$NAME ready on $ready of $desired nodes"
    exit 0
  fi
  if [ "$SECONDS" -ge "$deadline" ]; then
    echo "DaemonSet $NAMESPACE/$NAME ready on $ready of $desired nodes after ${TIMEOUT}s; it needs ${MIN_PERCENT}%." \
      "Nothing was uninstalled: look at the nodes that are not ready (kubectl get nodes; kubectl -n $NAMESPACE" \
      "get pods -o wide) and run pulumi up again." >&2
    exit 1
  fi
  sleep 10
done
"""


@dataclass(frozen=True)
class ReadinessGate:
    namespace: str
    name: str
    min_percent: int = MIN_READY_PERCENT
    timeout_seconds: int = TIMEOUT_SECONDS
    script: str = READINESS_SCRIPT

    def environment(self, kubeconfig: str, proxy_url: str | None = None) -> dict[str, str]:
        """The script's environment from the admin kubeconfig (components/bootstrap/kubeconfig.py)."""
        document = yaml.safe_load(kubeconfig)
        cluster = document["clusters"][0]["cluster"]
        user = document["users"][0]["user"]
        env = {"ENDPOINT": cluster["server"].removeprefix("https://"),
               "CA_PEM": base64.b64decode(cluster["certificate-authority-data"]).decode(),
               "CERT_PEM": base64.b64decode(user["client-certificate-data"]).decode(),
               "KEY_PEM": base64.b64decode(user["client-key-data"]).decode(),
               "NAMESPACE": self.namespace, "NAME": self.name, "MIN_PERCENT": str(self.min_percent),
               "TIMEOUT": str(self.timeout_seconds)}
        if proxy_url:
            env["PROXY"] = proxy_url
        return env

    def public(self) -> dict[str, str]:
        """The part of the environment that is no secret: what the gate watches, shown in the plan (the first-boot
        simulation reads it from the recorded command, components/simulation/pulumi_order.py)."""
        return {"NAMESPACE": self.namespace, "NAME": self.name, "MIN_PERCENT": str(self.min_percent),
                "TIMEOUT": str(self.timeout_seconds)}

    def secret_keys(self, proxy_url: str | None = None) -> tuple[str, ...]:
        return ("ENDPOINT", "CA_PEM", "CERT_PEM", "KEY_PEM", *(("PROXY",) if proxy_url else ()))


CILIUM_GATE = ReadinessGate("kube-system", "cilium")
"""Cilium's agent DaemonSet (the chart names it `cilium`)."""
