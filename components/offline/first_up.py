"""Which run of `pulumi up` creates what on a first deployment, and from where it must run.

The API servers' load balancer has one private frontend and the registry has public access disabled, so a
workstation or a hosted CI runner reaches only ARM. The first `up` therefore runs in two steps:

1. From anywhere with ARM access: `pulumi up --exclude '<FIRST_EXCLUDE>' --exclude-dependents` creates everything
   that needs only ARM: the network, the gallery and its Image Builder builds, the registry with its cache rules and
   the agents image (built server-side by ACR Tasks on the agent pool in the VNet), the PKI, etcd and the API
   servers. It leaves out the join access (the bootstrap tokens, cluster-info and kubeadm's RBAC, applied through
   the API server) and, as its dependents, the node scale sets and the in-cluster layer.
2. From a machine that reaches the API servers' internal load balancer (`cluster.inCluster.apiAccess`: in the VNet,
   a peered network, or a proxy through a jump host): a plain `pulumi up`, which creates the rest. Every later
   update runs from there too, as the Kubernetes provider reads the cluster on each preview.

The exclusion follows the Pulumi engine (pulumi/pulumi commit 1b5949891b3c): a URN glob's `**` matches anything and
`*` anything but `:` (pkg/resource/deploy/deployment.go, UrnTargets.getMatcher), and with `--exclude-dependents` a
resource is left out when its provider, its parent or any dependency is (pkg/resource/deploy/step_generator.go,
isExcludedFromUpdate; pkg/resource/state.go, GetAllDependencies), in registration order. This module applies the
same rules to the resources the offline engine records, so the plan shows each step's resources.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from components.offline.engine import Registration
from components.spec import ClusterSpec

FIRST_EXCLUDE = "**:kubernetes:JoinAccess**"
"""Every resource under the join access component, its own URN included (its type is in each child's URN)."""
NEEDS_THE_API = ("kubernetes:", "pulumi:providers:kubernetes")
"""Resources the Kubernetes provider applies: they need the API server."""


def urn_glob(glob: str) -> re.Pattern[str]:
    """UrnTargets.getMatcher: split at `**` (any text), then at `*` (any text without `:`), the rest quoted."""
    segments = ["[^:]*".join(re.escape(part) for part in segment.split("*")) for segment in glob.split("**")]
    return re.compile("^" + ".*".join(segments) + "$")


def excluded(registrations: list[Registration], globs: tuple[str, ...]) -> set[str]:
    """The URNs `pulumi up --exclude <globs> --exclude-dependents` leaves out."""
    patterns = [urn_glob(g) for g in globs]
    out: set[str] = set()
    for r in registrations:  # registration order is topological: what a resource depends on came before it
        provider = r.provider.rsplit("::", 1)[0] if r.provider else ""  # a reference is `<urn>::<id>`
        if any(p.match(r.urn) for p in patterns) or provider in out or r.parent in out \
                or any(d in out for d in r.dependencies):
            out.add(r.urn)
    return out


def _short(type_: str) -> str:
    return type_.split(":", 1)[-1] if type_.startswith(("azure-native:", "kubernetes:", "command:")) else type_


def first_up(registrations: list[Registration], spec: ClusterSpec, policy_args: str) -> dict[str, Any]:
    """The two steps of a first `pulumi up`: the command, where it runs, and what it creates (custom resources)."""
    left_out = excluded(registrations, (FIRST_EXCLUDE,))
    custom = [r for r in registrations if r.custom]
    first = [r for r in custom if r.urn not in left_out]
    second = [r for r in custom if r.urn in left_out]
    access = spec.in_cluster.api_access
    where = {"vnet": "a machine in the cluster's VNet (e.g. a self-hosted CI runner in the system subnet)",
             "peered": "a machine in the network peered with the cluster's VNet (network.hubVnetId)",
             "proxy": f"anywhere, through the jump host's proxy ({access.proxy_url or 'apiAccess.proxyUrl'})"}
    return {
        "steps": [
            {"step": 1, "runsFrom": "anywhere with ARM access (a workstation, a hosted CI runner)",
             "command": f"pulumi up --exclude '{FIRST_EXCLUDE}' --exclude-dependents {policy_args}".strip(),
             "resources": len(first), "byType": dict(sorted(Counter(_short(r.type) for r in first).items())),
             "needsTheApi": sorted({r.name for r in first if r.type.startswith(NEEDS_THE_API)})},
            {"step": 2, "runsFrom": where[access.path], "apiAccess": access.path,
             "command": f"pulumi up {policy_args}".strip(),
             "resources": len(second), "byType": dict(sorted(Counter(_short(r.type) for r in second).items()))},
        ],
        "laterUpdates": f"step 2's command, from {where[access.path]}",
    }
