"""At most one InfiniBand domain of a pool replaced by one change, unless the stack acknowledges each.

A node pool is one scale set per InfiniBand domain (docs/architecture.md). A change the node scale sets' provider
cannot make in place (a new VM size under a one-line `vmSize` edit, a zone) replaces every scale set of the pool at
once: Pulumi deletes each (delete first: the name is fixed) and creates it again, so the whole pool's VMs and every
gang on them go in one `pulumi up`. One domain at a time is a rollout; more is an outage unless it is said on
purpose in the stack: `cluster.acknowledgeDeletions.infinibandDomains` names the domains (or patterns, `h100-*`)
whose VMs this change deletes, by replacement or deletion alike.

CrossGuard gives a rule only the new inputs of a resource (pulumi_policy 1.21 `ResourceValidationArgs`: type, props,
urn, name, opts, provider; no old state; tests/test_policy_sight.py), so no pack rule can tell a replacement from a
create. This rule runs where both states are known: `gpucluster diff` / `plan --base` (two plans) and `gpucluster
check` over a real `pulumi preview --json` (its `replace` steps carry `oldState` and `newState`). In `pulumi preview`
and `pulumi up` themselves the node scale sets' provider refuses the second unacknowledged domain of a pool in its
Diff (components/azure/scale_set/replacement_guard.py, which reads ACK_KEY and `acknowledges` from here).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

from .props import INFINIBAND_TAG, POOL_TAG

POLICY = "infiniband-domains-replaced-one-at-a-time"
ACK_KEY = "cluster.acknowledgeDeletions.infinibandDomains"


@dataclass(frozen=True)
class Replaced:
    """A node scale set a change replaces: its name, tags and size before and after, and why it is replaced."""

    name: str
    tags: Mapping[str, Any]
    size_before: Any
    size_after: Any
    capacity: Any
    why: str


ERROR, WARNING = "error", "warning"
"""components/results.py `Severity`'s values: the pack runs without components/ (tests/test_result_vocabulary.py)."""


@dataclass(frozen=True)
class ReplacementFinding:
    """One replaced InfiniBand domain, in the vocabulary of components/results.py."""

    severity: str
    """error: unacknowledged, with another domain of the pool replaced too; warning otherwise."""
    path: str
    """The replaced scale set's logical name."""
    pool: str
    message: str
    fix: str
    source: str = POLICY


def acknowledges(patterns: Iterable[str], name: str) -> bool:
    """Whether the stack's acknowledgement (names or shell patterns, `h100-*`) covers the scale set `name`."""
    return any(fnmatchcase(name, pattern) for pattern in patterns)


def _pool(replaced: Replaced) -> str:
    return str(replaced.tags.get(POOL_TAG, "?"))


def judge(replaced: Iterable[Replaced], acknowledged: list[str] | None) -> list[ReplacementFinding]:
    """One finding per replaced InfiniBand domain. `acknowledged` is the stack's acknowledgement, or None when it
    is unknown (a bare preview): then nothing can be acknowledged and the findings are warnings."""
    by_pool: dict[str, list[Replaced]] = defaultdict(list)
    for item in replaced:
        if str(item.tags.get(INFINIBAND_TAG)) == "true":
            by_pool[_pool(item)].append(item)
    findings = []
    for pool, items in sorted(by_pool.items()):
        said = [i for i in items if acknowledged and acknowledges(acknowledged, i.name)]
        unsaid = sorted((i for i in items if i not in said), key=lambda i: i.name)
        for item in sorted(items, key=lambda i: i.name):
            what = (f"InfiniBand domain of pool {pool} replaced with its {item.capacity} VMs and the jobs on them "
                    f"({item.why}")
            what += f"; {item.size_before} -> {item.size_after})" if item.size_before != item.size_after else ")"
            if item in said:
                findings.append(ReplacementFinding(WARNING, item.name, pool, f"{what} (acknowledged in {ACK_KEY})", ""))
            elif len(unsaid) > 1 and acknowledged is not None:
                findings.append(ReplacementFinding(
                    ERROR, item.name, pool,
                    f"{what}, one of {len(unsaid)} domains of the pool this change replaces at once, unacknowledged",
                    f"replace one domain per change (docs/operations.md, \"Changing a pool's VM size\"), or drain the "
                    f"domains and add {item.name!r} (or '{pool}-*') to {ACK_KEY}"))
            else:
                findings.append(ReplacementFinding(WARNING, item.name, pool, what,
                                        f"drain it first; more than one at once needs {ACK_KEY}"))
    return findings
