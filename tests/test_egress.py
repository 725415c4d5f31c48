"""NAT gateway sizing and its limits."""

from __future__ import annotations

import pytest

from gpucluster.errors import SpecError
from gpucluster.planning.egress import plan_egress
from gpucluster.planning.limits import effective_limits
from tests.support.stacks import small_spec


def _plan(**cluster: object):
    spec = small_spec(**cluster)
    return plan_egress(spec, effective_limits(spec))


def test_public_ips_follow_ports_per_node(prod_spec) -> None:
    plan = plan_egress(prod_spec, effective_limits(prod_spec))
    assert plan.public_ips == 16 and plan.prefix_length == 28  # 7,505 nodes x 128 ports -> 15 IPs, a /28 prefix


def test_too_many_ports_suggests_a_value_that_fits() -> None:
    pools = [{"name": "cpu", "kind": "cpu", "vmSize": "Standard_D64ds_v5", "count": 9000, "podsPerNode": 8}]
    with pytest.raises(SpecError) as error:
        _plan(pools=pools, network={"addressSpace": ["10.0.0.0/12"], "egress": {"snatPortsPerNode": 256}})
    assert str(error.value.problems[0]) == (
        "cluster.network.egress.snatPortsPerNode: 9,003 nodes x 256 ports need 36 public IPs on the NAT gateway "
        "but it takes 16; lower snatPortsPerNode to 114 or below")


def test_beyond_one_gateway_says_so_instead_of_suggesting_an_invalid_value() -> None:
    pools = [{"name": "cpu", "kind": "cpu", "vmSize": "Standard_D64ds_v5", "count": 20000, "podsPerNode": 8}]
    with pytest.raises(SpecError) as error:
        _plan(pools=pools, network={"addressSpace": ["10.0.0.0/12"], "egress": {"snatPortsPerNode": 64}})
    assert "the cluster's single NAT gateway serves at most 16,128 nodes: split the cluster" in str(error.value)


def test_nat_gateway_ips_cannot_be_raised() -> None:
    with pytest.raises(SpecError) as error:
        _plan(limits={"natGatewayPublicIps": {"value": 32, "note": "asked nicely"}})
    assert "cluster.limits.natGatewayPublicIps" in str(error.value)
