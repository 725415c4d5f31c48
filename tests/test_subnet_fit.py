"""A pool in a subnet of the program's own network (components/planning/subnet_fit.py, NodePool `subnet_cidr`): the
same address arithmetic the IP plan sizes the cluster's blocks with, so the cluster's own planned blocks always fit
and a subnet one VM too small is refused with what the pool needs."""

from __future__ import annotations

from ipaddress import IPv4Network

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpucluster.errors import SpecError
from gpucluster.planning.cluster_plan import ClusterPlan, plan_cluster
from gpucluster.planning.ip_plan import RESERVED_IPS_PER_SUBNET, members_fitting
from gpucluster.planning.subnet_fit import subnet_problems
from tests.support.stacks import small_cluster, spec_of, stack_spec


@pytest.fixture(scope="module")
def prod() -> ClusterPlan:
    return plan_cluster(stack_spec("prod"))


def test_every_planned_pool_fits_its_planned_block(prod: ClusterPlan) -> None:
    for pool in prod.pools:
        assert subnet_problems(pool, prod.ip.pool_block(pool.name).cidr, "x") == [], pool.name


def test_a_prefix_mode_pool_one_vm_past_its_subnet_is_refused(prod: ClusterPlan) -> None:
    """prod's h100 pool takes /28 blocks: 3,125 VMs with 2 blocks each. A /18 holds fewer."""
    h100 = next(p for p in prod.pools if p.name == "h100")
    small = IPv4Network("10.2.0.0/18")
    fits = members_fitting(small, 2)
    assert fits < h100.nodes
    [problem] = subnet_problems(h100, small, "NodePoolArgs.subnet_cidr")
    assert problem.path == "NodePoolArgs.subnet_cidr"
    assert "pool h100 needs" in problem.message and f"({fits:,} VMs)" in problem.message
    assert "3,125 VMs with 2 /28 blocks each" in problem.message


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])  # plans: no wall-clock bound
@given(st.integers(min_value=1, max_value=400), st.integers(min_value=1, max_value=60), st.integers(min_value=18,
                                                                                                   max_value=28))
def test_secondary_ip_pools_fit_exactly_when_their_addresses_do(count: int, pods: int, prefix: int) -> None:
    raw = small_cluster(network={"addressSpace": ["10.0.0.0/12"]})
    raw["pools"][1].update({"count": count, "podsPerNode": pods})
    pool = plan_cluster(spec_of(raw)).pools[1]
    cidr = IPv4Network(f"10.8.0.0/{prefix}")
    needed = pool.nodes * (1 + pods)
    assert (subnet_problems(pool, cidr, "x") == []) == (needed <= cidr.num_addresses - RESERVED_IPS_PER_SUBNET)


def test_the_rdma_range_is_refused(prod: ClusterPlan) -> None:
    [problem] = subnet_problems(prod.pools[0], IPv4Network("172.16.0.0/20"), "x")
    assert "the InfiniBand/RDMA network" in problem.message


def test_node_pool_args_refuse_a_subnet_the_pool_does_not_fit(prod: ClusterPlan) -> None:
    from gpucluster.azure.scale_set.pool import NodePoolArgs

    h100 = next(p for p in prod.pools if p.name == "h100")
    with pytest.raises(SpecError) as refused:
        NodePoolArgs(scope=None, plan=h100, subnet_id="/subscriptions/x/subnets/y", join=None,  # type: ignore[arg-type]
                     access=None, images=None, subnet_cidr=IPv4Network("10.2.0.0/18"))  # type: ignore[arg-type]
    assert refused.value.problems[0].path == "NodePoolArgs.subnet_cidr"
