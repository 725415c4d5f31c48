"""The rollout: the order in which every machine is re-imaged after a change to what it boots (node image, Kubernetes
patch, kubelet config, boot document), in waves a controller drives one after another (docs/operations.md,
"Rolling a node image or boot change").

Pure planning. The rules, each a guarantee the plan already states elsewhere:

- Control plane first (the Kubernetes version skew policy puts the API servers ahead of the kubelets): etcd members
  one at a time in the order they are named, then the events etcd's, then the API servers one instance at a time;
  never two zones' members at once. With one member out etcd stays writable; whether it also survives a zone lost
  during that wave depends on the layout (5 members over 3 zones: a zone of two lost while a third member is
  out leaves 2 of 5), so each etcd wave states it (`quorumIfZoneLost`): a rollout without surge cannot promise more.
  Whoever re-images them (the runbook, docs/operations.md) leaves the leader for last: the leader is known only at
  run time.
- Then the node pools, system pools first, then CPU, confidential, GPU and rack pools; within a pool zone by zone in
  the order of zone names, so a wave never spans two zones: a wave and a zone failure together never take more than
  that zone plus the wave.
- A GPU or rack pool: at most `gpuDomainsPerWave` InfiniBand domains (a rack pool's NVLink racks) per wave, 1 by
  default. A wave of more than one domain also keeps to the GPUs of the pool that no team's nominal quota holds
  (its capacity less the teams' nominal GPUs on its flavor, planning/scheduling.py), so every team can still reach
  its nominal quota with the wave out.
- A CPU or system pool: scale sets of one zone adding up to at most `batchPercent` of the pool's nodes, at least one
  scale set; a CPU pool's wave of more than one scale set also keeps to the vCPUs no nominal quota holds.
- A single domain or scale set is the smallest wave there is: where even it is more than the unused quota (a fully
  subscribed pool), the wave still goes alone and states by how much the teams' nominal quota exceeds what stays in
  service (`quotaShort`), as the zone-loss table states what a zone failure costs.

Duration of a wave: reimage + boot (+ the GPU health agent's preflight on GPU pools), the stack's
`cluster.rollout` estimates. The drain wait before a GPU wave (until its workloads finish, or the drain deadline after
the checkpoint annotation) depends on the workloads; the worst case is stated beside the estimate.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from gpucluster.planning.control_plane import ControlPlanePlan, EtcdPlan, Member
from gpucluster.planning.node_images import API_SCALE_SET
from gpucluster.planning.placement import PoolPlan, ScaleSetPlan
from gpucluster.planning.scheduling import SchedulingPlan
from gpucluster.spec import PoolKind, Quota
from gpucluster.spec.rollout import RolloutSpec

POOL_ORDER = (PoolKind.SYSTEM, PoolKind.CPU, PoolKind.CONFIDENTIAL, PoolKind.GPU, PoolKind.RACK)


@dataclass(frozen=True)
class Wave:
    index: int
    kind: str
    """`etcd`, `etcd-events`, `apiserver` or `pool`."""
    pool: str
    """The pool's name, or the control-plane role."""
    zone: str | None
    """The one zone the wave's machines are in; None for an API server instance (the scale set balances zones)."""
    scale_sets: tuple[str, ...]
    """The scale sets whose instances the wave re-images (an etcd member's VM name for etcd waves)."""
    instance: int | None
    """An API server wave's instance index (the others re-image every instance of their scale sets)."""
    nodes: int
    gpus: int
    minutes: int
    drain_minutes: int
    """The most the wave waits for its workloads before the eviction (the drain deadline; 0 off GPU pools)."""
    quota_short_gpus: int = 0
    quota_short_vcpus: int = 0
    quorum_if_zone_lost: bool | None = None
    """An etcd wave: whether etcd keeps its quorum if any other zone is lost while this member is out."""
    topology: bool = False
    """A pool wave whose Kueue flavor is topology-aware (InfiniBand or rack pools, planning/scheduling.py): its gangs
    are fenced by label, never cordoned (planning/fence.py)."""
    preflight: bool = False
    """A pool wave whose nodes run the GPU health agent, which takes the preflight taint off a node that passes."""

    @property
    def gpu_hours(self) -> float:
        return self.gpus * self.minutes / 60


@dataclass(frozen=True)
class RolloutPlan:
    waves: tuple[Wave, ...]
    settings: RolloutSpec

    @property
    def minutes(self) -> int:
        return sum(w.minutes for w in self.waves)

    @property
    def minutes_with_drain(self) -> int:
        return sum(w.minutes + w.drain_minutes for w in self.waves)

    @property
    def gpu_hours(self) -> float:
        return sum(w.gpu_hours for w in self.waves)

    def wave_of(self, scale_set: str) -> Wave | None:
        return next((w for w in self.waves if scale_set in w.scale_sets), None)


def unused_quota(pool: PoolPlan, scheduling: SchedulingPlan) -> Quota:
    """The pool's capacity less the teams' nominal quota on its flavor (never below 0; a system pool has no flavor:
    all of it)."""
    nominal = [q.nominal for t in scheduling.teams for q in t.flavors if q.flavor == pool.name]
    return Quota(gpus=max(0, pool.gpus - sum(q.gpus for q in nominal)),
                 cpus=max(0, pool.vcpus - sum(q.cpus for q in nominal)),
                 memory_gib=max(0, pool.nodes * pool.size.memory_gib - sum(q.memory_gib for q in nominal)))


def _by_zone(pool: PoolPlan) -> Iterator[list[ScaleSetPlan]]:
    for zone in pool.zones:
        sets = sorted((s for s in pool.scale_sets if s.zone == zone), key=lambda s: s.index)
        if sets:
            yield sets


def pool_batches(pool: PoolPlan, unused: Quota, settings: RolloutSpec) -> list[list[ScaleSetPlan]]:
    """The pool's scale sets in waves (the module's rules); every scale set in exactly one, each wave in one zone."""
    gpu = pool.size.gpus > 0
    node_budget = max(1, pool.nodes * settings.batch_percent // 100)
    batches: list[list[ScaleSetPlan]] = []
    for sets in _by_zone(pool):
        batch: list[ScaleSetPlan] = []
        for s in sets:
            grown = [*batch, s]
            if gpu:
                fits = len(grown) <= settings.gpu_domains_per_wave and \
                    sum(x.capacity for x in grown) * pool.size.gpus <= unused.gpus
            else:
                fits = sum(x.capacity for x in grown) <= node_budget and (
                    pool.spec.kind is PoolKind.SYSTEM or sum(x.capacity for x in grown) * pool.size.vcpus <= unused.cpus)
            if batch and not fits:
                batches.append(batch)
                grown = [s]
            batch = grown
        batches.append(batch)
    return batches


def quorum_if_zone_lost(etcd: EtcdPlan, out: Member) -> bool:
    """Whether `etcd` keeps a quorum with `out` re-imaging and any other zone lost at the same time."""
    def left(zone: str) -> int:  # the members of neither the lost zone nor the one out
        return sum(1 for m in etcd.members if m.zone != zone and m != out)

    return all(left(zone) >= etcd.quorum for zone in {m.zone for m in etcd.members})


def _control_plane(cp: ControlPlanePlan) -> Iterator[tuple[str, str | None, str, int | None, bool | None]]:
    """(role, zone, machine, instance, quorum if a zone is lost) for each control-plane wave, in order."""
    for etcd in (cp.etcd, cp.events):
        if etcd is not None:
            for member in sorted(etcd.members, key=lambda m: m.index):
                yield etcd.role, member.zone, member.name, None, quorum_if_zone_lost(etcd, member)
    for instance in range(cp.api.count):
        yield "apiserver", None, API_SCALE_SET, instance, None


def plan_rollout(pools: tuple[PoolPlan, ...], control_plane: ControlPlanePlan, scheduling: SchedulingPlan,
                 settings: RolloutSpec) -> RolloutPlan:
    waves: list[Wave] = []
    machine_minutes = settings.reimage_minutes + settings.boot_minutes
    for role, zone, machine, instance, quorum in _control_plane(control_plane):
        waves.append(Wave(len(waves), role, role, zone, (machine,), instance, 1, 0, machine_minutes, 0,
                          quorum_if_zone_lost=quorum))
    ordered = sorted(pools, key=lambda p: POOL_ORDER.index(p.spec.kind))  # stable: the stack's order within a kind
    for pool in ordered:
        unused = unused_quota(pool, scheduling)
        gpu = pool.size.gpus > 0
        for batch in pool_batches(pool, unused, settings):
            nodes = sum(s.capacity for s in batch)
            minutes = machine_minutes + (settings.preflight_minutes if gpu else 0)
            short_vcpus = 0 if pool.spec.kind is PoolKind.SYSTEM else max(0, nodes * pool.size.vcpus - unused.cpus)
            waves.append(Wave(len(waves), "pool", pool.name, batch[0].zone, tuple(s.name for s in batch), None,
                              nodes, nodes * pool.size.gpus, minutes, settings.drain_deadline_minutes if gpu else 0,
                              quota_short_gpus=max(0, nodes * pool.size.gpus - unused.gpus) if gpu else 0,
                              quota_short_vcpus=0 if gpu else short_vcpus,
                              topology=pool.racks is not None or pool.infiniband, preflight=gpu))
    return RolloutPlan(tuple(waves), settings)
