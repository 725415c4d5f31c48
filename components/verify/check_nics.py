"""One real NIC list per prefix-mode scale set, read with the request and the parser the prefix IPAM controller uses.

Whether the scale-set NIC list returns the /28 blocks, and in which shape, is what no public source settles
(docs/ip-plan.md): the controller's parser (agents/prefix_ipam.py, imported here, not
copied) reads both documented shapes. If it finds no block on a NIC, pods on that node get no address.
"""

from __future__ import annotations

from ipaddress import IPv4Network
from typing import Any

from gpucluster.agents import prefix_ipam
from gpucluster.planning.cluster_plan import ClusterPlan
from gpucluster.planning.pod_addresses import PREFIX_LENGTH, node_addressing
from gpucluster.verify.arm import Arm
from gpucluster.verify.results import Check, Result

NICS = Check("azure.nics", "agents/prefix_ipam.py (the request: "
                           "NetworkInterfaces_ListVirtualMachineScaleSetNetworkInterfaces at ARM_API_VERSION; the "
                           "parser: blocks_by_instance); docs/ip-plan.md")


def nic_list_url(subscription: str, resource_group: str, scale_set: str) -> str:
    """The controller's request (prefix_ipam `_arm_lister`), relative to the ARM endpoint."""
    return (f"/subscriptions/{subscription}/resourceGroups/{resource_group}/providers/Microsoft.Compute/"
            f"virtualMachineScaleSets/{scale_set}/networkInterfaces?api-version={prefix_ipam.ARM_API_VERSION}")


def check_nics(arm: Arm, plan: ClusterPlan) -> list[Result]:
    from azure.core.exceptions import HttpResponseError

    results = []
    for pool in plan.pools:
        addressing = node_addressing(pool.spec)
        if not addressing.prefix_mode:
            continue
        subnet = plan.ip.pool_block(pool.name).cidr
        for scale_set in pool.scale_sets:
            subject = f"{scale_set.name} (pool {pool.name})"
            try:
                nics = arm.get_pages(nic_list_url(arm.subscription, arm.resource_group, scale_set.name))
            except HttpResponseError as error:
                if error.status_code != 404:
                    raise
                results.append(NICS.failed(subject, "the scale set does not exist", "run pulumi up for this stack"))
                continue
            results.append(_verdict(subject, nics, addressing.blocks, subnet))
    return results or [NICS.skipped("every pool", "no pool takes /28 blocks (podAddresses: secondaryIps): Cilium's "
                                                   "Azure IPAM hands out single secondary addresses, read by "
                                                   "cluster.nodes")]


def _verdict(subject: str, nics: list[dict[str, Any]], wanted: int, subnet: IPv4Network) -> Result:
    if not nics:
        return NICS.skipped(subject, "the scale set has no VM yet: no NIC to read; run again once it has one")
    refused: list[str] = []
    by_instance = prefix_ipam.blocks_by_instance(nics, refused=refused)
    if not by_instance and not refused:
        return NICS.failed(subject, f"{len(nics)} NIC(s) listed, none mapped to an instance by the controller's "
                                    "parser (properties.virtualMachine.id, else the NIC id's path)",
                           "the response's shape differs from what prefix_ipam.py reads: capture it "
                           "(az rest --method get --url <the request>) and fix instance_of_nic")
    problems = [f"{r}: a declared /{PREFIX_LENGTH} block came back without its length (read at Microsoft.Network "
                f"{prefix_ipam.ARM_API_VERSION}; the controller refuses the node)" for r in refused]
    for (_, instance), blocks in sorted(by_instance.items(), key=lambda item: int(item[0][1])):
        # The parser also publishes single secondary addresses (as /32, for the API servers' NICs): only a /28 in
        # the pool's subnet counts toward the blocks the plan puts on the NIC.
        good = [b for b in blocks if b.prefixlen == PREFIX_LENGTH and b.subnet_of(subnet)]
        wrong = [str(b) for b in blocks if b not in good]
        if len(good) < wanted:
            problems.append(f"instance {instance}: {len(good)} of {wanted} /{PREFIX_LENGTH} blocks")
        if wrong:
            problems.append(f"instance {instance}: blocks outside {subnet} or not /{PREFIX_LENGTH}: {', '.join(wrong)}")
    if problems:
        return NICS.failed(subject, "; ".join(problems[:5]) + (f" (+{len(problems) - 5} more)" if len(problems) > 5
                                                                else ""),
                           "the NICs carry single addresses where the plan puts /28 blocks: the scale set's model "
                           "must carry privateIPAddressPrefixLength (Microsoft.Compute 2026-07-02) and the "
                           "subscription must be onboarded to Prefix on NIC (docs/ip-plan.md); fix, then reimage "
                           "the instances")
    return NICS.passed(subject, f"{len(by_instance)} instance(s), each with {wanted} /{PREFIX_LENGTH} block(s) in "
                                f"{subnet}, as the prefix IPAM parses them")
