"""The rollout planner (components/planning/rollout.py): every scale set in exactly one wave, one zone per wave, at
most the configured InfiniBand domains of a GPU pool and the batch budget of a CPU or system pool per wave, wider
waves only within the quota no team holds, the control plane one member at a time in name order; over pool sizes
and on the shipped stacks."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpucluster.catalog.vm_sizes import CATALOG
from gpucluster.planning.cluster_plan import ClusterPlan, plan_cluster
from gpucluster.planning.placement import PoolPlan, ordered_zones, split_pool
from gpucluster.planning.rollout import pool_batches, quorum_if_zone_lost, unused_quota
from gpucluster.spec import ClusterSpec, PoolKind, PoolSpec, Quota
from gpucluster.spec.rollout import RolloutSpec
from tests.support.stacks import small_spec, stack_spec

GPU_SIZE = "Standard_ND96isr_H100_v5"
CPU_SIZE = "Standard_D64ds_v5"


def _pool(kind: PoolKind, size: str, count: int, zones: tuple[str, ...], max_per_set: int) -> PoolPlan:
    infiniband = kind is PoolKind.GPU
    spec = PoolSpec(name="pool", kind=kind, vm_size=size, count=count)
    return PoolPlan(spec, CATALOG[size], zones, infiniband, max_per_set,
                    split_pool("pool", count, zones, max_per_set, infiniband), accelerated_networking=True)


ZONES = st.sampled_from([("1",), ("1", "2"), ("1", "2", "3")])


def _check_cover(pool: PoolPlan, batches: list[list]) -> None:
    names = Counter(s.name for batch in batches for s in batch)
    assert names == Counter(s.name for s in pool.scale_sets), "every scale set in exactly one wave"
    for batch in batches:
        assert batch, "no empty wave"
        assert len({s.zone for s in batch}) == 1, "a wave never spans two zones"
    order = [s.zone for batch in batches for s in batch]
    assert order == sorted(order, key=lambda z: ordered_zones(pool.zones).index(z)), "zone by zone"


@settings(max_examples=150, deadline=None)
@given(count=st.integers(1, 4000), zones=ZONES, max_per_set=st.integers(1, 200), per_wave=st.integers(1, 6),
       unused_gpus=st.integers(0, 40_000))
def test_gpu_pool_waves(count: int, zones: tuple[str, ...], max_per_set: int, per_wave: int, unused_gpus: int) -> None:
    pool = _pool(PoolKind.GPU, GPU_SIZE, count, zones, max_per_set)
    batches = pool_batches(pool, Quota(gpus=unused_gpus), RolloutSpec(gpu_domains_per_wave=per_wave))
    _check_cover(pool, batches)
    for batch in batches:
        assert len(batch) <= per_wave, "at most gpuDomainsPerWave domains of a GPU pool"
        if len(batch) > 1:
            assert sum(s.capacity for s in batch) * pool.size.gpus <= unused_gpus, "wider only within unused quota"


def test_one_domain_per_wave_by_default() -> None:
    pool = _pool(PoolKind.GPU, GPU_SIZE, 3125, ("1", "2", "3"), 100)
    batches = pool_batches(pool, Quota(gpus=25_000), RolloutSpec())
    assert [len(b) for b in batches] == [1] * len(pool.scale_sets)


def test_wider_gpu_waves_when_quota_leaves_room() -> None:
    """Two domains per wave where the unused quota holds two: the batching is real, not one set per wave always."""
    pool = _pool(PoolKind.GPU, GPU_SIZE, 600, ("1",), 100)
    batches = pool_batches(pool, Quota(gpus=1600), RolloutSpec(gpu_domains_per_wave=2))
    assert [len(b) for b in batches] == [2, 2, 2]
    tight = pool_batches(pool, Quota(gpus=1599), RolloutSpec(gpu_domains_per_wave=2))
    assert [len(b) for b in tight] == [1] * 6


@settings(max_examples=150, deadline=None)
@given(count=st.integers(1, 6000), zones=ZONES, max_per_set=st.integers(1, 1000), percent=st.integers(1, 50),
       unused_cpus=st.integers(0, 400_000), system=st.booleans())
def test_cpu_pool_waves(count: int, zones: tuple[str, ...], max_per_set: int, percent: int, unused_cpus: int,
                        system: bool) -> None:
    pool = _pool(PoolKind.SYSTEM if system else PoolKind.CPU, CPU_SIZE, count, zones, max_per_set)
    batches = pool_batches(pool, Quota(cpus=unused_cpus), RolloutSpec(batch_percent=percent))
    _check_cover(pool, batches)
    budget = max(1, count * percent // 100)
    for batch in batches:
        nodes = sum(s.capacity for s in batch)
        if len(batch) > 1:
            assert nodes <= budget, "a batch of several scale sets stays within batchPercent of the pool"
            if not system:
                assert nodes * pool.size.vcpus <= unused_cpus, "and within the vCPUs no nominal quota holds"


def test_cpu_batches_fill_the_budget() -> None:
    pool = _pool(PoolKind.CPU, CPU_SIZE, 1200, ("1",), 100)
    assert [len(b) for b in pool_batches(pool, Quota(cpus=10**6), RolloutSpec(batch_percent=25))] == [3, 3, 3, 3]


@pytest.fixture(scope="module")
def prod_plan(prod_spec: ClusterSpec) -> ClusterPlan:
    return plan_cluster(prod_spec)


@pytest.fixture(scope="module")
def gb300_plan() -> ClusterPlan:
    return plan_cluster(stack_spec("gb300"))


def _cluster_checks(plan: ClusterPlan) -> None:
    rollout = plan.rollout
    assert rollout is not None
    waves = rollout.waves
    pool_sets = Counter(s for w in waves if w.kind == "pool" for s in w.scale_sets)
    assert pool_sets == Counter(s.name for p in plan.pools for s in p.scale_sets)
    for etcd in (plan.control_plane.etcd, plan.control_plane.events):
        if etcd is not None:
            assert [w.scale_sets for w in waves if w.kind == etcd.role] == [(m.name,) for m in etcd.members]
    assert [w.instance for w in waves if w.kind == "apiserver"] == list(range(plan.control_plane.api.count))
    kinds = [w.kind for w in waves]
    assert kinds.index("pool") > max(i for i, k in enumerate(kinds) if k != "pool"), "control plane first"
    by_pool = {p.name: p for p in plan.pools}
    for w in waves:
        if w.kind != "pool":
            assert len(w.scale_sets) == 1 and w.gpus == 0
            continue
        pool = by_pool[w.pool]
        assert len({s.zone for s in pool.scale_sets if s.name in w.scale_sets}) == 1
        if pool.size.gpus:
            assert len(w.scale_sets) == 1, "one InfiniBand domain (or rack) of a GPU pool per wave by default"
            assert w.drain_minutes == plan.spec.rollout.drain_deadline_minutes
    assert rollout.gpu_hours == pytest.approx(sum(w.gpus * w.minutes / 60 for w in waves))


def test_prod_rollout(prod_plan: ClusterPlan) -> None:
    _cluster_checks(prod_plan)
    rollout = prod_plan.rollout
    assert rollout is not None
    h100 = [w for w in rollout.waves if w.pool == "h100"]
    assert len(h100) == 32 and all(w.minutes == 15 + 10 + 15 for w in h100)
    # prod's teams hold all but the confidential pool's share of 25,000 GPUs: a domain out leaves them short
    unused = unused_quota(next(p for p in prod_plan.pools if p.name == "h100"), prod_plan.scheduling)
    assert all(w.quota_short_gpus == w.gpus - unused.gpus for w in h100)


def test_gb300_rollout_one_rack_per_wave(gb300_plan: ClusterPlan) -> None:
    _cluster_checks(gb300_plan)
    rollout = gb300_plan.rollout
    assert rollout is not None
    racks = [w for w in rollout.waves if w.pool == "gb300"]
    pool = next(p for p in gb300_plan.pools if p.name == "gb300")
    assert [w.scale_sets[0] for w in racks] == [s.name for s in sorted(
        pool.scale_sets, key=lambda s: (ordered_zones(pool.zones).index(s.zone), s.index))]
    assert all(w.gpus == pool.max_per_scale_set * pool.size.gpus for w in racks)


def test_quorum_if_zone_lost() -> None:
    """Five members over three zones (2, 2, 1): any member out and a zone of two lost leaves 2 of 5. Seven (3, 2, 2):
    a zone-1 member out keeps 4 of 7 whichever zone is lost (its own zone included); a zone-2 member out and zone 1
    lost leaves 3."""
    def verdicts(members: int) -> dict[str, tuple[str, bool]]:
        plan = plan_cluster(small_spec(controlPlane={"apiServers": {"count": 3}, "etcd": {"members": members},
                                                     "eventsEtcd": None}))
        etcd = plan.control_plane.etcd
        return {m.name: (m.zone, quorum_if_zone_lost(etcd, m)) for m in etcd.members}

    assert verdicts(5) == {"etcd-0": ("1", False), "etcd-1": ("2", False), "etcd-2": ("3", False),
                           "etcd-3": ("1", False), "etcd-4": ("2", False)}
    assert verdicts(7) == {"etcd-0": ("1", True), "etcd-1": ("2", False), "etcd-2": ("3", False),
                           "etcd-3": ("1", True), "etcd-4": ("2", False), "etcd-5": ("3", False),
                           "etcd-6": ("1", True)}


def test_durations_come_from_the_stack() -> None:
    spec = small_spec(rollout={"reimageMinutes": 20, "bootMinutes": 5, "preflightMinutes": 30,
                               "drainDeadlineMinutes": 60})
    rollout = plan_cluster(spec).rollout
    assert rollout is not None
    gpu = [w for w in rollout.waves if w.pool == "gpu"]
    assert gpu and all(w.minutes == 55 and w.drain_minutes == 60 for w in gpu)
    assert all(w.minutes == 25 for w in rollout.waves if w.pool != "gpu")
    assert rollout.minutes_with_drain == rollout.minutes + 60 * len(gpu)


def test_summary_and_report_carry_the_rollout(dev_out: Path) -> None:
    """summary.json `rollout` lists the planned waves as the planner made them; report.html shows each wave."""

    summary = json.loads((dev_out / "summary.json").read_text())
    plan = plan_cluster(stack_spec("dev"))
    rollout = summary["rollout"]
    assert [w["scaleSets"] for w in rollout["waves"]] == [list(w.scale_sets) for w in plan.rollout.waves]
    assert rollout["minutes"] == plan.rollout.minutes and rollout["gpuHours"] == round(plan.rollout.gpu_hours, 1)
    report = (dev_out / "report.html").read_text()
    assert f"Rollout: {len(rollout['waves'])} waves" in report
    for wave in rollout["waves"]:
        if wave["kind"] == "pool":
            assert f"<td class=l>{', '.join(wave['scaleSets'])}</td>" in report


def test_bad_rollout_settings_name_the_key() -> None:
    from gpucluster.errors import SpecError
    from tests.support.stacks import small_cluster, spec_of

    with pytest.raises(SpecError) as raised:
        spec_of(small_cluster(rollout={"batchPercent": 0, "gpuDomainsPerWave": 65}))
    assert sorted(str(p) for p in raised.value.problems) == [
        "cluster.rollout.batchPercent: must be >= 1 (got 0)", "cluster.rollout.gpuDomainsPerWave: must be <= 64 (got 65)"]


def test_the_report_says_when_a_wave_takes_a_whole_scale_set_above_the_batch_share() -> None:
    """prod's CPU pool: a scale set is the smallest wave, and one of them holds more than batchPercent of the pool."""
    from gpucluster.report.rollout_report import rollout_data, whole_set_text

    plan = plan_cluster(stack_spec("prod"))
    data = rollout_data(plan)
    assert data is not None
    cpu = next(p for p in plan.pools if p.name == "cpu")
    largest = max(s.capacity for s in cpu.scale_sets)
    assert largest * 100 > cpu.nodes * data["settings"]["batchPercent"]
    assert f"pool cpu: {largest:,} of {cpu.nodes:,} nodes" in whole_set_text(data)
    small = {**data, "waves": [w for w in data["waves"] if w["kind"] != "pool" or w["gpus"]]}
    assert whole_set_text(small) == ""
