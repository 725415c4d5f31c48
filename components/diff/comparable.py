"""Whether two plans describe one deployment, so that a diff of them means something.

Pulumi identifies a resource by its URN, `urn:pulumi:<stack>::<project>::<type>::<name>`
(pulumi/pulumi sdk/go/common/resource/urn.go, NewURN): two plans of different stacks or projects share no
URN, so every resource would read as deleted and created again, with a flood of false errors (renamed scale
sets, deleted teams). The cluster name prefixes every Azure name the library derives, so two clusters share
no resource name either. Such a pair is refused with the reason, unless the caller asks to compare anyway;
then the base's URNs are rewritten to the head's stack and project, and resources match by type and name.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from typing import Any

from gpucluster.diff.sides import Side

PREFIX = "urn:pulumi:"
ANYWAY_FLAG = "--across-stacks"


def stack_and_project(side: Side) -> tuple[str, str] | None:
    """The (stack, project) most of the side's URNs carry; None when it holds no parseable URN."""
    found: Counter[tuple[str, str]] = Counter()
    for urn in side.resources:
        parts = urn.removeprefix(PREFIX).split("::")
        if urn.startswith(PREFIX) and len(parts) >= 4:
            found[(parts[0], parts[1])] += 1
    return found.most_common(1)[0][0] if found else None


def cluster_name(side: Side) -> str | None:
    cluster = (side.summary or {}).get("cluster")
    name = cluster.get("name") if isinstance(cluster, dict) else None
    return name if isinstance(name, str) else None


def why_not_comparable(base: Side, head: Side) -> str | None:
    """One sentence saying why the two plans are not of one deployment, or None when they are."""
    ours, theirs = stack_and_project(base), stack_and_project(head)
    if ours is not None and theirs is not None and ours != theirs:
        return (f"the base is stack {ours[0]!r} of project {ours[1]!r} and the head stack {theirs[0]!r} of project "
                f"{theirs[1]!r}: no resource URN matches, so every resource would read as deleted and created")
    names = cluster_name(base), cluster_name(head)
    if None not in names and names[0] != names[1]:
        return (f"the base is cluster {names[0]!r} and the head cluster {names[1]!r}: every Azure name derives from "
                "the cluster name, so every resource would read as deleted and created")
    return None


def _rebased(value: Any, old: str, new: str) -> Any:
    if isinstance(value, str):
        return new + value[len(old):] if value.startswith(old) else value
    if isinstance(value, dict):  # resources and digests are keyed by URN
        return {_rebased(k, old, new): _rebased(v, old, new) for k, v in value.items()}
    if isinstance(value, list):
        return [_rebased(v, old, new) for v in value]
    return value


def onto(base: Side, head: Side) -> Side:
    """The base with its URNs (and URN references in its states) moved to the head's stack and project."""
    ours, theirs = stack_and_project(base), stack_and_project(head)
    if ours is None or theirs is None or ours == theirs:
        return base
    old, new = f"{PREFIX}{ours[0]}::{ours[1]}::", f"{PREFIX}{theirs[0]}::{theirs[1]}::"
    return replace(base, resources=_rebased(base.resources, old, new),
                   secret_digests=_rebased(base.secret_digests, old, new))
