"""The bring-up, simulated from the plan: where every workload of the in-cluster layer can land, and in
what order things become possible. A workload that can land nowhere (or waits on something that waits
on it) is a plan error naming the workload and what blocks it.

Pure. Nodes: each pool's registered labels and taints (what the kubelet registers: node_labels,
node_taints and the preflight taint). Workloads: the layer's own Deployments and DaemonSets and the pods the
pinned charts deploy, their needs read from the pod specs (components/simulation/bring_up_layer.py). Facts
appear as workloads start: a CNI agent on a pool makes its pods routable, NFD labels GPU nodes, the
operator's toolkit brings the `nvidia` runtime, the device plugin makes GPUs allocatable, the health
checks remove the preflight taint. A pod lands where its nodeSelector and required node affinity match,
its tolerations cover the taints, its waits are met and its requests fit next to the DaemonSets; a
Deployment with required hostname anti-affinity needs a node per replica.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpucluster.planning.bring_up import BringUp, BringUpStep, Stuck
from gpucluster.planning.taints import NodeTaint
from gpucluster.vocabulary import GPU_RESOURCE, LABEL_HOSTNAME


@dataclass
class PoolState:
    name: str
    labels: dict[str, str]
    taints: list[NodeTaint]
    gpus: int
    facts: set[str] = field(default_factory=set)
    """"cni", "runtime:nvidia", "gpu-allocatable", ... as workloads give them."""
    cpu_millis: int = 0
    """Allocatable per node: the kubelet reserves nothing here (no kubeReserved/systemReserved), so the
    VM's vCPUs; memory less the kubelet's default hard eviction threshold (memory.available 100Mi)."""
    memory_mib: int = 0
    nodes: int = 0


@dataclass(frozen=True)
class Workload:
    name: str
    kind: str
    """DaemonSet (one pod per matching node), Deployment, Apply: objects kube-apiserver admits once what it
    needs is there (placed once, like a Deployment, on the API servers' pool), or Gate: a step of `pulumi up` that
    waits for a DaemonSet to run on a share of the nodes it is scheduled on (`watches`), placed nowhere."""
    node_selector: dict[str, str]
    tolerations: tuple[dict[str, Any], ...]
    host_network: bool = False
    runtime_class: str | None = None
    gpus: bool = False
    source: str = "declared by the library"
    needs: tuple[str, ...] = ()
    """Facts of the pool (or cluster-wide facts, set on every pool) the pod waits for before it can start."""
    cpu_millis: int = 0
    memory_mib: int = 0
    """The pod's requests (max of init containers and the sum of containers)."""
    gives: tuple[str, ...] = ()
    """What it makes possible once running, as the keys blockers name: "label:k=v" (a node label),
    "untaint:key" (a taint removed), anything else a fact ("cni", "runtime:nvidia", ...). A DaemonSet gives
    on the pools it runs on; a Deployment (a controller) on every pool."""
    gives_if: tuple[tuple[str, str], ...] = ()
    """(given key, key the pool must have first): the operator labels only nodes NFD labelled; NFD labels
    only nodes with NVIDIA hardware ("hardware:nvidia-gpu")."""
    node_affinity: tuple[tuple[dict[str, Any], ...], ...] = ()
    """requiredDuringSchedulingIgnoredDuringExecution nodeSelectorTerms (ORed) of matchExpressions (ANDed)."""
    replicas: int = 1
    one_per_node: bool = False
    """A required pod anti-affinity on kubernetes.io/hostname: each replica needs its own node."""
    watches: tuple[str, int] | None = None
    """A Gate's DaemonSet (workload name) and the percent of the nodes it is scheduled on that must run it."""


GATE_PLACE = "pulumi up"
"""Where a Gate "runs": the machine `pulumi up` runs on, no pool."""


def tolerates(tolerations: tuple[dict[str, Any], ...], taint: NodeTaint) -> bool:
    """core/v1 Toleration semantics (k8s.io/api core/v1 toleration.go ToleratesTaint)."""
    for t in tolerations:
        if t.get("effect") and t["effect"] != taint.effect:
            continue
        if not t.get("key"):
            if t.get("operator") == "Exists":
                return True
            continue
        if t["key"] != taint.key:
            continue
        if t.get("operator") == "Exists" or t.get("value", "") == taint.value:
            return True
    return False


def _why(w: Workload, pool: PoolState, daemon_load: tuple[int, int] = (0, 0)) -> tuple[str, str | None] | None:
    """Why `w` cannot land on `pool` now (and the key of what would unblock it), or None.
    `daemon_load`: requests of the DaemonSet pods on each node."""
    for key, value in w.node_selector.items():
        if pool.labels.get(key) != value:
            return f"label {key}={value} absent", f"label:{key}={value}"
    if w.node_affinity and not any(all(_expression(e, pool.labels) for e in term) for term in w.node_affinity):
        return "required node affinity matches no label of the pool", None
    for taint in pool.taints:
        if taint.effect in ("NoSchedule", "NoExecute") and not tolerates(w.tolerations, taint):
            return f"taint {taint.key}={taint.value}:{taint.effect} not tolerated", f"untaint:{taint.key}"
    if not w.host_network and "cni" not in pool.facts:
        return "no pod network yet (CNI agent not running)", "cni"
    if w.runtime_class and f"runtime:{w.runtime_class}" not in pool.facts:
        return f"runtime class {w.runtime_class} not on the node yet", f"runtime:{w.runtime_class}"
    for fact in w.needs:
        if fact not in pool.facts:
            return f"waits for {fact}", fact
    if w.gpus and "gpu-allocatable" not in pool.facts:
        return f"{GPU_RESOURCE} not allocatable yet (device plugin not running)", "gpu-allocatable"
    if pool.cpu_millis and w.kind != "DaemonSet":
        cpu, memory = daemon_load[0] + w.cpu_millis, daemon_load[1] + w.memory_mib
        if cpu > pool.cpu_millis or memory > pool.memory_mib:
            return (f"requests {w.cpu_millis}m CPU / {w.memory_mib}Mi with the DaemonSets' {daemon_load[0]}m / "
                    f"{daemon_load[1]}Mi exceed a node's allocatable {pool.cpu_millis}m / {pool.memory_mib}Mi"), None
    return None


def _gate_why(w: Workload, pools: list[PoolState], workloads: list[Workload],
              placed: dict[str, set[str]]) -> tuple[str, str | None] | None:
    """Why a Gate has not passed yet (and the key of what would pass it), or None. Its needs are cluster-wide
    (earlier gates), its DaemonSet must run on `watches` percent of the nodes it selects."""
    for fact in w.needs:
        if not all(fact in p.facts for p in pools):
            return f"waits for {fact}", fact
    if w.watches is None:
        return None
    name, percent = w.watches
    daemon = next((d for d in workloads if d.name == name), None)
    if daemon is None:
        return f"waits for DaemonSet {name}, which nothing in the layer deploys", None
    selected = [p for p in pools if not _selector_only(daemon, p)]
    desired = sum(p.nodes for p in selected)
    ready = sum(p.nodes for p in selected if _ready(daemon, p, placed))
    if desired and ready * 100 >= desired * percent:
        return None
    return (f"{name} is ready on {ready} of the {desired} nodes it is scheduled on; the gate needs {percent}%",
            f"ready:{name}")


def _ready(daemon: Workload, pool: PoolState, placed: dict[str, set[str]]) -> bool:
    """A DaemonSet's pod is ready on a pool once it runs there and gives what it gives (Cilium's agent reports ready
    only once its node has addresses: the condition of its "cni")."""
    return pool.name in placed[daemon.name] and all(condition in _keys(pool) for _, condition in daemon.gives_if)


def _expression(e: dict[str, Any], labels: dict[str, str]) -> bool:
    """core/v1 NodeSelectorRequirement on labels (In, NotIn, Exists, DoesNotExist)."""
    op, key, values = e.get("operator"), e.get("key", ""), list(e.get("values") or [])
    if op == "In":
        return labels.get(key) in values
    if op == "NotIn":
        return labels.get(key) not in values
    if op == "Exists":
        return key in labels
    if op == "DoesNotExist":
        return key not in labels
    return False


def _blocker(w: Workload, pool: PoolState, daemon_load: tuple[int, int] = (0, 0)) -> str | None:
    why = _why(w, pool, daemon_load)
    return None if why is None else why[0]


def _explain(start: Workload, pool: PoolState, workloads: list[Workload], placed: dict[str, set[str]],
             pools: list[PoolState] | None = None) -> str:
    """The chain of waits from a stuck workload: each link names the workload and what it waits for; a chain
    that comes back to a workload already in it is a cycle. A Gate's link continues with its DaemonSet on the
    largest pool it is missing from."""
    links: list[str] = []
    seen: list[str] = []
    current: Workload | None = start
    while current is not None:
        if current.name in seen:
            cycle = " -> ".join([*seen[seen.index(current.name):], current.name])
            return "; ".join(links) + f": a cycle ({cycle})"
        seen.append(current.name)
        if current.kind == "Gate":
            why = _gate_why(current, pools or [pool], workloads, placed)
            if why is None:
                return "; ".join(links)
            reason, key = why
            links.append(f"{current.name} waits: {reason}")
            if key is None:
                return "; ".join(links)
            if key.startswith("ready:"):
                daemon = next(d for d in workloads if d.name == key.removeprefix("ready:"))
                missing = [p for p in pools or [pool] if not _ready(daemon, p, placed) and not _selector_only(daemon, p)]
                pool = max(missing, key=lambda p: (p.nodes, p.name))
                unmet = [c for _, c in daemon.gives_if if c not in _keys(pool)]
                if pool.name not in placed[daemon.name] or not unmet:
                    links[-1] += f"; on {pool.name}"
                    current = daemon
                    continue
                # It runs there but is not ready until the pool has what it waits for: follow that.
                links.append(f"on {pool.name}: {daemon.name} runs but is ready only after {unmet[0]}")
                if daemon.name in seen:
                    cycle = " -> ".join([*seen[seen.index(daemon.name):], daemon.name])
                    return "; ".join(links) + f": a cycle ({cycle})"
                seen.append(daemon.name)
                key = unmet[0]
        else:
            why = _why(current, pool, _daemon_load(workloads, placed, pool.name))
            if why is None:
                return "; ".join(links)
            reason, key = why
            links.append(f"{current.name} waits: {reason}")
        if key is None:
            return "; ".join(links)
        current = None
        while current is None:
            giver = _giver(key, pool, workloads)
            if giver is None:
                return "; ".join(links) + " (nothing in the layer provides it)"
            running = placed[giver.name] and (giver.kind != "DaemonSet" or pool.name in placed[giver.name])
            condition = dict(giver.gives_if).get(key)
            if running and condition and condition not in _keys(pool):
                # It runs but gives the key here only once the pool has the condition: follow that instead.
                links.append(f"{giver.name} runs but gives {key} only after {condition}")
                if giver.name in seen:
                    cycle = " -> ".join([*seen[seen.index(giver.name):], giver.name])
                    return "; ".join(links) + f": a cycle ({cycle})"
                seen.append(giver.name)
                key = condition
            elif running:
                return "; ".join(links)
            else:
                current = giver
                if giver.kind in ("Deployment", "StatefulSet") and _selector_only(giver, pool) and pools:
                    # A controller gives on every pool from wherever it runs: follow it where it may run.
                    pool = next((p for p in pools if not _selector_only(giver, p)), pool)
    return "; ".join(links)


def _giver(key: str, pool: PoolState, workloads: list[Workload]) -> Workload | None:
    """The workload that would give `key` on `pool` (a DaemonSet only on pools it selects)."""
    def could_select(g: Workload) -> bool:
        return all(pool.labels.get(k) == v or any(f"label:{k}={v}" in w.gives for w in workloads)
                   for k, v in g.node_selector.items())
    return next((g for g in workloads if key in g.gives and (g.kind != "DaemonSet" or could_select(g))), None)


def _keys(pool: PoolState) -> set[str]:
    """What a pool has, as blocker keys (labels and facts)."""
    return {f"label:{k}={v}" for k, v in pool.labels.items()} | set(pool.facts)


def _daemon_load(workloads: list[Workload], placed: dict[str, set[str]], pool: str) -> tuple[int, int]:
    on = [w for w in workloads if w.kind == "DaemonSet" and pool in placed[w.name]]
    return sum(w.cpu_millis for w in on), sum(w.memory_mib for w in on)


def _give(w: Workload, pool: PoolState) -> None:
    """Apply what a running workload gives to one pool (if the pool meets the key's condition)."""
    conditions = dict(w.gives_if)
    for key in w.gives:
        if key in conditions and conditions[key] not in _keys(pool):
            continue
        if key.startswith("label:"):
            label, _, value = key.removeprefix("label:").partition("=")
            pool.labels[label] = value
        elif key.startswith("untaint:"):
            pool.taints = [t for t in pool.taints if t.key != key.removeprefix("untaint:")]
        else:
            pool.facts.add(key)


def simulate(pools: list[PoolState], workloads: list[Workload]) -> BringUp:
    by_name = {p.name: p for p in pools}
    placed: dict[str, set[str]] = {w.name: set() for w in workloads}
    steps: list[BringUpStep] = []
    step = 0
    changed = True
    while changed:
        changed = False
        step += 1
        landed: list[tuple[Workload, PoolState | None]] = []
        for w in workloads:
            if w.kind != "DaemonSet" and placed[w.name]:
                continue
            if w.kind == "Gate":
                if _gate_why(w, pools, workloads, placed) is None:
                    landed.append((w, None))
                continue
            for pool in pools:
                if pool.name not in placed[w.name] and _blocker(w, pool, _daemon_load(workloads, placed,
                                                                                    pool.name)) is None:
                    landed.append((w, pool))
                    if w.kind != "DaemonSet":
                        break
        before = _snapshot(pools)
        for w, pool in landed:
            placed[w.name].add(pool.name if pool else GATE_PLACE)
            changed = True
        for w in workloads:  # running workloads keep acting (an operator labels nodes as NFD labels them)
            targets = sorted(placed[w.name]) if w.kind == "DaemonSet" else sorted(by_name) if placed[w.name] else []
            for name in targets:
                _give(w, by_name[name])
        changed = changed or _snapshot(pools) != before
        for name in dict.fromkeys(w.name for w, _ in landed):
            steps.append(BringUpStep(step, name, tuple(sorted(p.name if p else GATE_PLACE for w, p in landed
                                                           if w.name == name))))
    stuck: list[Stuck] = []
    for w in workloads:
        if w.kind == "Gate" and not placed[w.name]:
            stuck.append(Stuck(w.name, None, _explain(w, pools[0], workloads, placed, pools)))
        elif w.kind != "DaemonSet" and not placed[w.name]:
            selected = [p for p in pools if not _selector_only(w, p)]
            if selected:
                stuck.append(Stuck(w.name, None, "; ".join(
                    f"on {p.name}: {_explain(w, p, workloads, placed, pools)}" for p in selected)))
            else:
                stuck.append(Stuck(w.name, None, "; ".join(
                    f"{p.name}: {_blocker(w, p, _daemon_load(workloads, placed, p.name))}" for p in pools)))
        elif w.kind == "DaemonSet":
            for pool in pools:
                if pool.name not in placed[w.name] and not _selector_only(w, pool):
                    stuck.append(Stuck(w.name, pool.name, _explain(w, pool, workloads, placed, pools)
                                       or "never scheduled"))
    for w in workloads:
        if w.kind in ("Deployment", "StatefulSet") and w.one_per_node and placed[w.name]:
            room = sum(p.nodes for p in pools if _blocker(w, p, _daemon_load(workloads, placed, p.name)) is None)
            if room and w.replicas > room:
                stuck.append(Stuck(w.name, None, f"{w.replicas} replicas, one per node (required pod anti-affinity "
                                                 f"on {LABEL_HOSTNAME}), on {room} node(s) it may use"))
    dense = {n: i + 1 for i, n in enumerate(sorted({st.step for st in steps}))}
    return BringUp(tuple(BringUpStep(dense[st.step], st.workload, st.pools) for st in steps), tuple(stuck))


def _snapshot(pools: list[PoolState]) -> list[tuple[object, ...]]:
    return [(sorted(p.labels.items()), list(p.taints), sorted(p.facts)) for p in pools]


def _selector_only(w: Workload, pool: PoolState) -> bool:
    """The workload does not select this pool at all: its selector labels never appear there, or its required node
    affinity matches none of the pool's own labels (the DaemonSet controller runs a pod only on nodes matching both,
    kubernetes pkg/controller/daemon NodeShouldRunDaemonPod)."""
    if any(pool.labels.get(k) != v for k, v in w.node_selector.items()):
        return True
    return bool(w.node_affinity) and not any(all(_expression(e, pool.labels) for e in term)
                                             for term in w.node_affinity)
