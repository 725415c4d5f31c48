"""At most one InfiniBand domain of a pool replaced per deployment, refused where the engine asks for it: the node
scale sets' provider `diff` (components/azure/scale_set/provider.py).

A CrossGuard rule is handed only the new inputs, before the provider is asked what changes (docs/architecture.md,
"What a policy can see"), so `pulumi preview --policy-pack policies` and a plain `pulumi up` cannot tell a one-line
`vmSize` edit from a create. The provider's Diff can: it has the old state and the new inputs, and it answers the
replacement. Each answer that replaces an InfiniBand domain is recorded here, per pool, in the provider host's
process; the second unacknowledged domain of the same pool is refused, in `pulumi preview` as in `pulumi up`.

Why process-wide state is sound (read in pulumi/pulumi at 1b5949891b, v3.259.0+14, and the installed SDK 3.272):
- one process per deployment: every engine run (a `pulumi preview`, and each of `pulumi up`'s preview and update)
  builds its own plugin context and host and releases their plugins when it ends (pkg/engine/update.go `Update` ->
  `newDeploymentContext`; pkg/engine/deployment.go "The engine owns it and closes it when the deployment context
  terminates"; sdk/go/common/resource/plugin/context.go `Close` -> `Host.ReleaseContext`; pkg/host/host.go
  `ReleaseContext` closes the context's resource plugins);
- one process for every dynamic resource of the program: they are all `pulumi-python:dynamic:Resource` with no
  explicit provider, so they share the default provider of package `pulumi-python`, loaded once per package and
  version (pkg/resource/deploy/default_providers.go `handleRequest`: "Have we loaded this provider before? Use the
  existing reference"); the registry holds one plugin per provider reference (pkg/resource/deploy/providers/
  registry.go `GetProvider`), and each plugin `host.Provider` starts is one `pulumi-resource-pulumi-python`, that is
  `python -m pulumi.dynamic` (sdk/python/dist/pulumi-resource-pulumi-python);
- four RPCs at once: the host serves from `ThreadPoolExecutor(max_workers=4)` (pulumi/dynamic/__main__.py), so the
  ledger is locked; it keeps process-wide state itself (`_PROVIDER_CACHE` under `_PROVIDER_LOCK`).
Entries are keyed by the scale set's resource id, so a Diff asked twice for one scale set counts once. Which domain is
the first is the order the engine sends the Diffs; the refusal names both.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gpucluster.policies.rules.replacements import ACK_KEY
from gpucluster.vocabulary import INFINIBAND_TAG, POOL_TAG


class ReplacementRefusedError(RuntimeError):
    """A second InfiniBand domain of one pool replaced in the same deployment without the stack's acknowledgement."""


@dataclass
class ReplacementLedger:
    """The unacknowledged InfiniBand domains the provider has answered "replace" for in this process, by pool."""

    _replaced: dict[str, dict[str, str]] = field(default_factory=dict)
    """pool -> {resource id (lower case): scale set name}"""
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def admit(self, resource_id: str, name: str, tags: Mapping[str, Any], is_acknowledged: bool, why: str) -> None:
        """Record a replacement of `name` (whose tags say its pool and whether it is an InfiniBand domain); raise
        ReplacementRefusedError when another unacknowledged domain of its pool is already replaced in this deployment."""
        if is_acknowledged or str(tags.get(INFINIBAND_TAG)) != "true":
            return
        pool, key = str(tags.get(POOL_TAG, "?")), resource_id.lower()
        with self._lock:
            domains = self._replaced.setdefault(pool, {})
            others = sorted(other for k, other in domains.items() if k != key)
            if not others:
                domains[key] = name
                return
        raise ReplacementRefusedError(
            f"pool {pool}: replacing InfiniBand domain {name} ({why}) as well as {', '.join(others)} in one deployment "
            f"would take both domains' VMs and jobs at once; replace one domain per `pulumi up` (`--target` its URN) "
            f"after draining it, or drain the domains and add {name!r} (or '{pool}-*') to {ACK_KEY} in the stack")


LEDGER = ReplacementLedger()
"""The provider host's ledger: one per process, and so one per deployment."""
