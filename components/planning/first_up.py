"""The first `pulumi up` with the in-cluster layer on: where it reaches the API server from, and the
explicit wait for the API servers' /readyz before anything is applied through them.

Pure. The readiness script runs where `pulumi up` runs (a pulumi-command local Command the Kubernetes
provider depends on), with curl: anonymous /readyz is allowed by the default system:public-info-viewer
role, and the CA in the plan verifies the API server's certificate.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpucluster.errors import Problem, SpecError
from gpucluster.spec import ClusterSpec

PATH = "cluster.inCluster.apiAccess"

READINESS_SCRIPT = r"""#!/usr/bin/env bash
# Waits until the API servers behind the internal load balancer answer /readyz.
# Env: ENDPOINT (host:port), CA_PEM (cluster CA), TIMEOUT (seconds), PROXY (optional proxy URL).
set -euo pipefail
ca=$(mktemp)
trap 'rm -f "$ca"' EXIT
printf '%s\n' "$CA_PEM" > "$ca"
proxy=()
if [ -n "${PROXY:-}" ]; then
  proxy=(--proxy "$PROXY")
fi
deadline=$((SECONDS + TIMEOUT))
until curl --silent --fail --max-time 5 --cacert "$ca" ${proxy[@]+"${proxy[@]}"} "https://$ENDPOINT/readyz" > /dev/null; do
  if [ "$SECONDS" -ge "$deadline" ]; then
    echo "API server https://$ENDPOINT/readyz not ready after ${TIMEOUT}s. pulumi up must reach the internal" \
      "load balancer: run it inside the VNet, from a peered network, or through a proxy" \
      "(cluster.inCluster.apiAccess, docs/operations.md)." >&2
    exit 1
  fi
  sleep 5
done
echo "API server https://$ENDPOINT is ready"
"""


@dataclass(frozen=True)
class FirstUpPlan:
    path: str
    proxy_url: str | None
    endpoint: str
    timeout_seconds: int
    script: str = READINESS_SCRIPT

    def environment(self, ca_pem: str) -> dict[str, str]:
        env = {"ENDPOINT": self.endpoint, "CA_PEM": ca_pem, "TIMEOUT": str(self.timeout_seconds)}
        if self.proxy_url:
            env["PROXY"] = self.proxy_url
        return env


def plan_first_up(spec: ClusterSpec, endpoint: str) -> FirstUpPlan:
    access = spec.in_cluster.api_access
    problems: list[Problem] = []
    if access.path == "proxy" and not access.proxy_url:
        problems.append(Problem(f"{PATH}.proxyUrl", "path proxy needs the proxy pulumi reaches the VNet through, "
                                "e.g. socks5://127.0.0.1:1080 for `ssh -D 1080 <jump host>`"))
    if access.path != "proxy" and access.proxy_url:
        problems.append(Problem(f"{PATH}.proxyUrl", f"only read with path proxy (path is {access.path}); "
                                "remove it or set path: proxy"))
    if access.path == "peered" and not spec.network.hub_vnet_id and spec.network.existing_vnet is None:
        problems.append(Problem(f"{PATH}.path", "peered needs the network pulumi runs in peered with the cluster's "
                                "VNet: set network.hubVnetId (or network.existingVnet, a VNet peered where it is "
                                "managed), or use vnet or proxy"))
    if problems:
        raise SpecError(problems)
    return FirstUpPlan(access.path, access.proxy_url, endpoint, access.ready_timeout_minutes * 60)
