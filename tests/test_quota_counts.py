"""Per-subscription counts beside vCPUs: what the cluster consumes, checked like vCPU quota.

The egress prefix's addresses count as Standard public IPs in full (azure-docs public-ip-address-prefix.md: "each
public IP prefix counts against regional quota for the full count of IPs"); Azure's default is 10 on many offers
(includes/azure-virtual-network-limits.md). NAT gateways (1,000), scale sets (2,500) and NICs (65,536) per
subscription and region are fixed limits (azure-nat-gateway-limits.md, azure-virtual-machine-scale-sets-limits.md,
azure-virtual-network-limits.md). A need past a declared quota or a fixed limit is a plan error naming the key.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from gpucluster.catalog.quotas import COUNT_QUOTAS
from gpucluster.errors import SpecError
from gpucluster.offline.engine import ProgramRun
from gpucluster.planning.cluster_plan import plan_cluster
from gpucluster.planning.quota import CountNeed, count_problems
from gpucluster.policies.rules.props import resource_kind
from gpucluster.spec import ClusterSpec
from tests.support.plan_sides import stack_raw
from tests.support.stacks import plan_stack, small_cluster, spec_of


def _counts(spec: ClusterSpec) -> dict[str, CountNeed]:
    return {c.quota.key: c for c in plan_cluster(spec).counts}


def test_the_counts_are_what_the_program_declares(prod_spec: ClusterSpec, prod_run: ProgramRun) -> None:
    counts = _counts(prod_spec)
    of = {}
    for r in prod_run.registrations:  # node scale sets are dynamic resources judged as the typed class
        of.setdefault(resource_kind(r.type, r.inputs).rsplit(":", 1)[-1], []).append(r.inputs)
    [prefix] = of["PublicIPPrefix"]
    assert counts["standardPublicIps"].needed == 2 ** (32 - prefix["prefixLength"]) == 16
    assert counts["publicIpPrefixes"].needed == len(of["PublicIPPrefix"]) == 1
    assert counts["natGateways"].needed == len(of["NatGateway"]) == 1
    sets = of["VirtualMachineScaleSet"]
    assert counts["scaleSets"].needed == len(sets) == 44
    nics = sum(s["sku"]["capacity"] * len(s["virtualMachineProfile"]["networkProfile"]["networkInterfaceConfigurations"])
               for s in sets) + len(of["NetworkInterface"])
    assert counts["networkInterfaces"].needed == nics == 7_514  # with the deployment runner's NIC


def test_prod_needs_more_public_ips_than_azures_default_and_says_so(prod_spec: ClusterSpec) -> None:
    """Undeclared, the need is not an error (as for vCPUs) but the row says the subscription may lack it."""
    ips = _counts(prod_spec)["standardPublicIps"]
    assert (ips.needed, ips.declared, ips.quota.default, ips.exceeds_default, ips.short_by) == (16, None, 10, True, 0)


def test_a_declared_public_ip_quota_below_the_need_fails_the_plan(prod_spec: ClusterSpec) -> None:
    raw = prod_spec.model_dump(by_alias=True, mode="json")
    raw["resourceQuota"] = {"standardPublicIps": 10}
    with pytest.raises(SpecError) as caught:
        plan_cluster(spec_of(raw))
    [problem] = caught.value.problems
    assert problem.path == "cluster.resourceQuota.standardPublicIps"
    assert "needs 16 Standard public IP addresses (a public IP prefix counts in full) in eastus2 but the declared " \
           "quota is 10 (short by 6)" in problem.message
    raw["resourceQuota"] = {"standardPublicIps": 16}
    assert not _counts(spec_of(raw))["standardPublicIps"].exceeds_default


def test_too_many_scale_sets_for_a_region_fails_the_plan() -> None:
    """2,600 one-VM InfiniBand domains (a stricter vmsPerInfinibandDomain is allowed), 3 system sets and the API
    servers' set pass Azure's 2,500 sets."""
    raw = small_cluster(limits={"vmsPerInfinibandDomain": {"value": 1, "note": "one VM per domain, on purpose"}},
                        network={"addressSpace": ["10.0.0.0/12"]})
    raw["pools"][1]["count"] = 2_600
    with pytest.raises(SpecError) as caught:
        plan_cluster(spec_of(raw))
    assert [(p.path, "2,604 virtual machine scale sets" in p.message and "allows 2,500" in p.message)
            for p in caught.value.problems] == [("cluster.pools", True)]


@pytest.mark.parametrize("key", ["natGateways", "networkInterfaces"])
def test_a_count_past_a_fixed_limit_is_an_error_whatever_is_declared(key: str) -> None:
    quota = COUNT_QUOTAS[key]
    assert quota.fixed and quota.default is not None
    over = CountNeed(quota, quota.default + 1, None, "cluster.pools")
    [problem] = count_problems((over, CountNeed(quota, quota.default, None, "cluster.pools")), "eastus2")
    assert problem.path == "cluster.pools" and f"allows {quota.default:,} per subscription and region" in problem.message


def test_public_ip_prefixes_have_no_count_of_their_own() -> None:
    prefixes = CountNeed(COUNT_QUOTAS["publicIpPrefixes"], 10**6, None, "cluster.network.egress")
    assert prefixes.limit is None and count_problems((prefixes,), "eastus2") == []


def test_only_adjustable_counts_can_be_declared() -> None:
    with pytest.raises(SpecError, match=r"cluster\.resourceQuota\.natGateways: unknown key"):
        spec_of(small_cluster(resourceQuota={"natGateways": 5000}))


def test_public_ip_shortfall_exits_2_and_writes_nothing(tmp_path: Path) -> None:
    raw = stack_raw("dev")
    raw["resourceQuota"] = {"standardPublicIps": 1}
    stack = tmp_path / "Pulumi.dev.yaml"
    stack.write_text(yaml.safe_dump({"config": {"azure-native:location": "eastus2", "gpucluster:cluster": raw}}))
    out = tmp_path / "out"
    result = plan_stack(stack, out)
    assert result.returncode == 2 and not out.exists()
    assert "cluster.resourceQuota.standardPublicIps: the stack needs 2 Standard public IP addresses" in result.stderr
    assert "Traceback" not in result.stderr
