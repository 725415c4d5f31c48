"""Helm releases judged at the stack's size: an atomic release whose first install fails is uninstalled, and a
release that waits needs Helm's readiness rule met for every workload it waits for.

Pure. The rules, read at their source:
- helm pkg/action/install.go (v3, the library pulumi-kubernetes 4.x embeds): `i.Wait = i.Wait || i.Atomic`;
  `failRelease` uninstalls the release when Atomic is set ("release %s failed, and has been uninstalled due to
  atomic being set"). For a first install that is the whole chart: for Cilium, every node's agent.
- helm pkg/kube/ready.go `daemonSetReady`: a RollingUpdate DaemonSet is ready when `numberReady >=
  desiredNumberScheduled - maxUnavailable`, maxUnavailable scaled from a percentage rounding up
  (`intstr.GetScaledValueFromIntOrPercent(..., true)`); an OnDelete DaemonSet is ready at once.
- How many nodes may be unready in a healthy cluster: cluster-autoscaler's own bound, the one this cluster runs
  with (components/kubernetes/objects/autoscaler.py: `--ok-total-unready-count`, `--max-total-unready-percentage`;
  cluster-autoscaler clusterstate: unhealthy above max(count, percentage x nodes)). A release that needs more
  nodes ready than that fails on an ordinary bring-up.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from gpucluster.kubernetes.objects.releases import ReleaseOptions

DAEMONSET_DEFAULT_MAX_UNAVAILABLE = 1
"""apps/v1 defaulting of an absent DaemonSet updateStrategy: RollingUpdate, maxUnavailable 1
(kubernetes pkg/apis/apps/v1/defaults.go SetDefaults_DaemonSet)."""


def scaled(value: int | str, total: int) -> int:
    """intstr.GetScaledValueFromIntOrPercent with roundUp, as ready.go calls it."""
    if isinstance(value, int):
        return value
    text = value.strip()
    if not text.endswith("%"):
        return int(text)
    return math.ceil(int(text[:-1]) * total / 100)


def max_unavailable(daemonset: dict[str, Any], desired: int) -> int | None:
    """The DaemonSet's maxUnavailable at `desired` pods; None for OnDelete (Helm does not wait for it)."""
    strategy = (daemonset.get("spec") or {}).get("updateStrategy") or {}
    if strategy.get("type", "RollingUpdate") != "RollingUpdate":
        return None
    value = (strategy.get("rollingUpdate") or {}).get("maxUnavailable", DAEMONSET_DEFAULT_MAX_UNAVAILABLE)
    return scaled(value, desired)


def daemonset_ready(desired: int, ready: int, unavailable: int) -> bool:
    """helm pkg/kube/ready.go daemonSetReady, once every pod is scheduled and updated."""
    return ready >= desired - unavailable


def tolerated_unready(nodes: int, ok_count: int, percent: int) -> int:
    """Unready nodes a healthy cluster may have: cluster-autoscaler's bound."""
    return max(ok_count, math.floor(nodes * percent / 100))


@dataclass(frozen=True)
class ReleaseProblem:
    release: str
    reason: str


def release_problems(options: tuple[ReleaseOptions, ...], daemonsets: dict[str, tuple[dict[str, Any], int]],
                     ok_count: int, percent: int) -> list[ReleaseProblem]:
    """`daemonsets`: each chart DaemonSet by name, with how many nodes it runs on at the stack's size."""
    problems = []
    for o in options:
        if o.atomic:
            problems.append(ReleaseProblem(o.chart, "is atomic: Helm uninstalls a first install that fails or times "
                                                    "out (helm pkg/action/install.go failRelease), taking the "
                                                    "chart's running pods with it"))
        if not (o.wait or o.atomic):
            continue
        for name in o.waits_for:
            if name not in daemonsets:
                continue
            daemonset, desired = daemonsets[name]
            unavailable = max_unavailable(daemonset, desired)
            tolerated = tolerated_unready(desired, ok_count, percent)
            if unavailable is not None and not daemonset_ready(desired, desired - tolerated, unavailable):
                problems.append(ReleaseProblem(o.chart, (
                    f"waits {o.timeout_seconds}s for DaemonSet {name} ready on {desired - unavailable} of {desired} "
                    f"nodes (helm pkg/kube/ready.go: ready >= desired - maxUnavailable {unavailable}); a healthy "
                    f"cluster of this size may have {tolerated} nodes unready (cluster-autoscaler's bound), so the "
                    "install can fail on an ordinary first boot: do not wait for it (skipAwait)")))
    return problems
