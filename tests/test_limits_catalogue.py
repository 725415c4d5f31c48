"""The limits catalogue tells adjustable from fixed, and a fixed limit is passed only on a declared exception.

Source: MicrosoftDocs/azure-docs includes/azure-virtual-network-limits.md ("If there's no maximum limit column,
the resource doesn't have adjustable limits"; the Resource Manager networking table has one `Limit` column with
subnets per VNet 3,000, private IP addresses per VNet 65,536, per peered group 128,000, per NIC 256) and
articles/nat-gateway/nat-gateway-resource.md ("A NAT gateway resource can use up to 16 IP addresses").
"""

from __future__ import annotations

import pytest

from gpucluster.catalog.limits import DEFAULT_LIMITS
from gpucluster.errors import SpecError
from gpucluster.planning.limits import effective_limits
from tests.support.stacks import small_spec


def test_fixed_rows_are_the_ones_azure_lists_without_a_maximum() -> None:
    fixed = {key: (limit.value, limit.source) for key, limit in DEFAULT_LIMITS.items() if limit.fixed}
    net = "azure-docs includes/azure-virtual-network-limits.md"
    assert fixed == {"privateIpsPerNic": (256, net), "privateIpsPerVnet": (65_536, net),
                     "privateIpsPerPeeredGroup": (128_000, net), "subnetsPerVnet": (3_000, net),
                     "natGatewayPublicIps": (16, "azure-docs articles/nat-gateway/nat-gateway-resource.md")}
    assert not DEFAULT_LIMITS["vmsPerInfinibandDomain"].fixed  # raised to 300 by a support request


@pytest.mark.parametrize("key", [k for k, v in DEFAULT_LIMITS.items() if v.fixed])
def test_a_note_cannot_raise_a_fixed_limit(key: str) -> None:
    raised = DEFAULT_LIMITS[key].value + 1
    with pytest.raises(SpecError) as error:
        effective_limits(small_spec(limits={key: {"value": raised, "note": "raised by support"}}))
    [problem] = error.value.problems
    assert problem.path == f"cluster.limits.{key}"
    assert "as fixed" in problem.message and DEFAULT_LIMITS[key].source in problem.message
    assert f"cluster.limits.{key}.azureException.reference" in problem.message


def test_lowering_a_fixed_limit_and_a_declared_exception_are_accepted() -> None:
    lowered = effective_limits(small_spec(limits={"privateIpsPerNic": {"value": 64, "note": "stricter budget"}}))
    assert lowered["privateIpsPerNic"].value == 64 and not lowered["privateIpsPerNic"].past_fixed
    granted = effective_limits(small_spec(limits={"natGatewayPublicIps": {
        "value": 32, "note": "two gateways' worth", "azureException": {"reference": "case 42"}}}))
    assert granted["natGatewayPublicIps"].past_fixed and granted["natGatewayPublicIps"].exception == "case 42"
