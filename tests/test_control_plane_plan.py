"""Control-plane sizing and quorum placement."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpucluster.errors import SpecError
from gpucluster.planning.api_sizing import ANCHOR_LABELS, ApiLoad, NodeShape, plan_api_load
from gpucluster.planning.cluster_plan import api_load
from gpucluster.planning.control_plane import GIB, place_members, plan_control_plane
from gpucluster.planning.limits import effective_limits
from gpucluster.planning.placement import plan_pools
from gpucluster.planning.registry import cluster_upstream_images, plan_registry
from gpucluster.spec import ClusterSpec
from tests.support.stacks import small_cluster, spec_of


def load_of(spec: ClusterSpec) -> ApiLoad:
    return api_load(spec, plan_pools(spec, effective_limits(spec)), plan_registry(spec, cluster_upstream_images(spec)))


def _gpu_nodes(count: int, **overrides: Any) -> ClusterSpec:
    raw = small_cluster(**overrides)
    raw["pools"][1]["count"] = count
    return spec_of(raw)


def test_prod_sizes_and_zone_loss(prod_spec) -> None:
    plan = plan_control_plane(prod_spec, load_of(prod_spec))
    assert plan.api.count == 5 and plan.api.size.memory_gib >= 70 * 1.5 / 1.074
    assert [plan.api.in_zone(z) for z in prod_spec.zones] == [2, 2, 1]
    assert plan.etcd.data_on_nvme and 2 * GIB <= plan.etcd.quota_backend_bytes <= 8 * GIB
    assert plan.events is not None and len(plan.events.members) == 3
    assert all(plan.etcd.survives_loss_of(z) and plan.events.survives_loss_of(z) for z in prod_spec.zones)


@given(members=st.sampled_from([3, 5, 7, 9]), zones=st.integers(3, 5))
def test_round_robin_never_gives_a_zone_a_quorum_with_three_or_more_zones(members: int, zones: int) -> None:
    placed = place_members("etcd", members, tuple(str(z) for z in range(1, zones + 1)))
    quorum = members // 2 + 1
    assert all(sum(1 for m in placed if m.zone == str(z)) < quorum for z in range(1, zones + 1))


def _problems(cp: dict[str, Any], zones: list[str] | None = None) -> list[str]:
    spec = spec_of(small_cluster(controlPlane=cp, **({"zones": zones} if zones else {})))
    with pytest.raises(SpecError) as caught:
        plan_control_plane(spec, load_of(spec))
    return [str(p) for p in caught.value.problems]


@pytest.mark.parametrize("members", [1, 2, 4])
def test_even_or_small_etcd_is_refused(members: int) -> None:
    [line] = _problems({"etcd": {"members": members}, "eventsEtcd": None})
    assert line.startswith(f"cluster.controlPlane.etcd.members: {members} members: etcd needs an odd number")


def test_two_zones_put_a_quorum_in_one_unless_overridden() -> None:
    [line] = _problems({"etcd": {"members": 3}, "eventsEtcd": None}, zones=["1", "2"])
    assert "put 2 in zone 1, a quorum of 2" in line and "quorumOverrideReason" in line
    spec = spec_of(small_cluster(zones=["1", "2"], controlPlane={
        "etcd": {"members": 3, "quorumOverrideReason": "region has two zones"}, "eventsEtcd": None}))
    plan = plan_control_plane(spec, load_of(spec))
    assert not plan.etcd.survives_loss_of("1")


def test_api_server_override_too_small_shows_the_need_and_its_source() -> None:
    spec = _gpu_nodes(7_497, controlPlane={"apiServers": {"count": 3, "vmSize": "Standard_D4s_v5"}, "eventsEtcd": None})
    with pytest.raises(SpecError) as caught:
        plan_control_plane(spec, load_of(spec))
    [line] = [str(p) for p in caught.value.problems]
    assert line.startswith("cluster.controlPlane.apiServers.vmSize: Standard_D4s_v5 (16 GiB, 4 vCPUs) is too small: "
                           "API servers of 7,503 nodes need 97 GiB (heap ~70 GB x 1.5: ")
    assert "Scaling Kubernetes to 7,500 nodes" in line and "MB per node" in line


def test_etcd_without_nvme_uses_a_guaranteed_iops_disk() -> None:
    spec = spec_of(small_cluster(controlPlane={"etcd": {"vmSize": "Standard_D16ds_v5"}, "eventsEtcd": None}))
    plan = plan_control_plane(spec, load_of(spec))
    assert not plan.etcd.data_on_nvme and "Premium SSD v2" in plan.etcd.reasoning


def test_etcd_override_too_small_shows_the_need() -> None:
    spec = _gpu_nodes(7_500, controlPlane={"etcd": {"vmSize": "Standard_D4s_v5"}, "eventsEtcd": None})
    with pytest.raises(SpecError, match=r"etcd.vmSize: Standard_D4s_v5 \(16 GiB, 4 vCPUs\) is too small: etcd with a 8 GiB"):
        plan_control_plane(spec, load_of(spec))


def test_scale_flags_are_part_of_the_plan(prod_spec) -> None:
    flags = plan_control_plane(prod_spec, load_of(prod_spec)).api.flags
    assert (flags.max_requests_inflight, flags.max_mutating_requests_inflight) == (1_501, 750)


def test_the_model_gives_the_anchor_back_at_its_counts() -> None:
    """OpenAI's cluster (7,500 nodes, ~200,000 pods, nodes with the well-known labels only) gets the 70 GB the
    model was anchored on; the serving part grows with nodes, the object part with each kind's count and size."""
    images = ("example.azurecr.io/ghcr.io/org/trainer:1.0",)
    anchor = plan_api_load((NodeShape("anchor", 7_500, ANCHOR_LABELS, (), 96, 900, 8, 110),), images, "azure:///x")
    at_anchor = replace(anchor, kinds=tuple(replace(k, count=200_000) if k.kind == "Pod" else k for k in anchor.kinds))
    assert at_anchor.heap_gb == pytest.approx(70, abs=1e-6)
    half = plan_api_load((NodeShape("anchor", 3_750, ANCHOR_LABELS, (), 96, 900, 8, 110),), images, "azure:///x")
    assert half.heap_gb < anchor.heap_gb / 1.9
    spec = _gpu_nodes(100)
    pods = next(k for k in load_of(spec).kinds if k.kind == "Pod")
    assert pods.count == sum(p.count * p.pods_per_node for p in spec.pools) == 100 * 16 + 3 * 30  # every node full


def test_bigger_node_objects_cost_memory() -> None:
    """Labels the pools declare are stored on every node object: the model weighs them."""
    plain = load_of(_gpu_nodes(2_000))
    raw = small_cluster()
    raw["pools"][1]["count"] = 2_000
    raw["pools"][1]["labels"] = {f"example.com/label-{i}": "x" * 60 for i in range(20)}
    labelled = load_of(spec_of(raw))
    node = {k.kind: k for k in plain.kinds}["Node"]
    assert {k.kind: k for k in labelled.kinds}["Node"].bytes_each > node.bytes_each + 1_000
    assert labelled.heap_bytes > plain.heap_bytes


def test_etcd_that_cannot_fit_its_quota_is_an_error_naming_the_source() -> None:
    """etcd v3.6 dev-guide/limit.md: 8 GiB is the suggested maximum quota. Events in the main etcd of a cluster of
    30,000 nodes at 110 pods each need more."""
    raw = small_cluster(controlPlane={"apiServers": {"count": 3}, "etcd": {"members": 3}, "eventsEtcd": None},
                        network={"addressSpace": ["10.0.0.0/8"]})
    raw["pools"][1].update(count=30_000, podsPerNode=110, vmSize="Standard_D4s_v5", kind="cpu")
    with pytest.raises(SpecError) as caught:
        plan_control_plane(spec := spec_of(raw), load_of(spec))
    [line] = [str(p) for p in caught.value.problems]
    assert line.startswith("cluster.controlPlane.etcd: etcd would hold ~")
    assert "past the 8 GiB quota maximum (etcd v3.6 dev-guide/limit.md" in line
