"""The plan summary as plain data: one model for the terminal summary, `--json` and report.html.

Everything here is JSON-serialisable and computed from the ClusterPlan and the program run; renderers
only format it.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from gpucluster.catalog.flowcontrol import APF_SEATS_SOURCE, SLO_SOURCE
from gpucluster.offline.policy_runner import Violation
from gpucluster.planning.agent_load import AgentLoadPlan
from gpucluster.planning.api_sizing import ANCHOR_SOURCE, ENVELOPE_SOURCE, ApiLoad
from gpucluster.planning.cluster_plan import ClusterPlan
from gpucluster.planning.control_plane import EtcdPlan
from gpucluster.planning.node_images import NodeImagesPlan
from gpucluster.planning.node_template import node_taints
from gpucluster.planning.placement import PoolPlan
from gpucluster.planning.pod_addresses import node_addressing
from gpucluster.report.cluster_data import balloons_data, scheduling_data
from gpucluster.report.cost_report import cost_data
from gpucluster.report.lifetimes_report import tokens_data
from gpucluster.report.metrics_report import metrics_data
from gpucluster.report.rollout_report import rollout_data
from gpucluster.report.versions_report import bring_up_data, node_pods_data, versions_data

SCHEMA_VERSION = 1


def _pool(pool: PoolPlan, zones: tuple[str, ...], images: NodeImagesPlan) -> dict[str, Any]:
    size = pool.size

    def amounts(nodes: int) -> dict[str, int]:
        return {"nodes": nodes, "gpus": nodes * size.gpus, "vcpus": nodes * size.vcpus,
                "memoryGib": nodes * size.memory_gib}

    racks = {} if pool.racks is None else {"racks": {
        "subgroupSize": pool.racks.subgroup_size, "gpusPerRack": pool.racks.subgroup_size * size.gpus,
        "sparePerZone": pool.racks.spare_racks_per_zone,
        "groups": [{"name": g.name, "zone": g.zone, "racks": g.racks, "blockCapacity": g.block_capacity}
                   for g in pool.racks.groups],
        "zones": {z: {"racks": pool.racks.racks_in_zone(z), "gpus": pool.nodes_in_zone(z) * size.gpus}
                  for z in zones}}}
    return {
        **racks,
        "name": pool.name, "kind": pool.kind.value, "vmSize": size.name, "gpuModel": size.gpu_model,
        "infiniband": pool.infiniband, "maxPerScaleSet": pool.max_per_scale_set,
        **amounts(pool.nodes),
        "zones": {z: {"scaleSets": sum(1 for s in pool.scale_sets if s.zone == z), **amounts(pool.nodes_in_zone(z))}
                  for z in zones},
        "image": str(images.pools[pool.name]),
        "scaleSets": [{"name": s.name, "zone": s.zone, "capacity": s.capacity, "gpus": s.capacity * size.gpus,
                       "singlePlacementGroup": s.single_placement_group, "image": str(images.machines[s.name])}
                      for s in pool.scale_sets],
        "taints": [f"{t.key}={t.value}:{t.effect}" for t in node_taints(pool)],
        "confidential": None if pool.confidential is None else {
            "securityType": pool.confidential.security_type, "secureBoot": pool.confidential.secure_boot,
            "vtpm": pool.confidential.vtpm, "osDiskEncryption": pool.confidential.os_disk_encryption,
            "keys": ("customer-managed via " + pool.confidential.customer_key.attestation_authority
                     if pool.confidential.customer_key else "platform-managed"),
            "image": str(images.pools[pool.name])},
    }


def _etcd(etcd: EtcdPlan | None) -> dict[str, Any] | None:
    if etcd is None:
        return None
    return {"role": etcd.role, "members": [{"name": m.name, "zone": m.zone} for m in etcd.members],
            "quorum": etcd.quorum, "vmSize": etcd.size.name, "reasoning": etcd.reasoning,
            "vcpus": etcd.size.vcpus, "memoryGib": etcd.size.memory_gib,
            "memoryNeededGib": round(etcd.memory_needed_gib, 1), "quotaBackendGib": etcd.quota_backend_bytes / 2**30,
            "dataGib": round(etcd.db_bytes / 2**30, 3), "dataOnNvme": etcd.data_on_nvme, "overridden": etcd.overridden}


def _agent_load(load: AgentLoadPlan | None) -> dict[str, Any] | None:
    if load is None:
        return None
    return {"level": load.level, "shares": load.shares, "serverConcurrency": load.server_concurrency,
            "seatsPerServer": load.seats_per_server, "servers": load.servers, "seats": load.seats,
            "seatsNeeded": round(load.seats_needed, 1), "seatsSource": APF_SEATS_SOURCE, "latencySource": SLO_SOURCE,
            "agents": [{"name": a.name, "namespace": a.namespace, "serviceAccount": a.service_account,
                        "nodes": a.nodes, "callsPerMinute": a.calls_per_minute,
                        "requestsPerSecond": None if a.requests_per_second is None else round(a.requests_per_second, 1),
                        "source": a.source} for a in load.agents]}


def _load(load: ApiLoad | None) -> dict[str, Any] | None:
    if load is None:
        return None
    return {"nodes": load.nodes, "heapGb": round(load.heap_gb, 1), "objectsGb": round(load.cached_bytes / 1e9, 2),
            "servingMbPerNode": round(load.serving_bytes_per_node / 1e6, 2), "anchor": ANCHOR_SOURCE,
            "kinds": [{"kind": k.kind, "count": k.count, "bytesEach": k.bytes_each,
                       "writesPerWindow": k.writes_per_window, "eventsStore": k.events_store, "why": k.why}
                      for k in load.kinds],
            "pastEnvelope": load.envelope_notes(), "envelope": ENVELOPE_SOURCE}


def _etcd_left(etcd: EtcdPlan | None, zone: str) -> dict[str, Any] | None:
    if etcd is None:
        return None
    return {"left": len(etcd.members) - etcd.in_zone(zone), "of": len(etcd.members),
            "quorumHolds": etcd.survives_loss_of(zone)}


def headroom_text(block: dict[str, Any]) -> str:
    unit = "VMs" if block["name"].startswith("pool-") else "members"
    return f"+{block['headroomMembers']:,} {unit}"


def unpinned_text(ip: dict[str, Any]) -> str:
    """Unpinned blocks move when their pool outgrows them: say so, with the pins to add."""
    pins = ", ".join(f"{name}: {ip['pins'][name]}" for name in ip["unpinned"])
    return (f"not pinned: {', '.join(ip['unpinned'])}; growth past a block's room moves it. Freeze the layout "
            f"under cluster.network.pinnedBlocks: {{{pins}}}")


def entries_text(ip: dict[str, Any]) -> str:
    """VNet address entries as Azure counts them (an IP configuration or a /28 block each)."""
    e = ip["entries"]
    text = f"VNet address entries: {e['vnet']:,} of {e['limit']:,}"
    if e["peeredGroup"] is not None:
        text += f"; peered group: {e['peeredGroup']:,} of {e['peeredGroupLimit']:,}"
    return text


def prerequisite_text(ip: dict[str, Any]) -> str | None:
    """The subscription prerequisite of prefix mode, said plainly; None when no pool uses it."""
    prefix = ip["prefixOnNic"]
    if not prefix["pools"]:
        return None
    head = (f"Prerequisite: pools {', '.join(prefix['pools'])} put pod addresses in /28 blocks on their NICs "
            "(\"Prefix on NIC\", a preview Microsoft enables per subscription; docs/ip-plan.md): ")
    if prefix["onboarding"]:
        return head + f"onboarding recorded: {prefix['onboarding']}"
    return head + ("onboarding not recorded: have the subscription onboarded before `pulumi up` and record it at "
                   "cluster.network.prefixOnNicOnboarding")


FIXED_TEXT = "Azure documents this limit as fixed"


def count_status_text(row: dict[str, Any]) -> str:
    """The status of one per-subscription count row, without markup (summary and report colour it)."""
    if row["azureDefault"] is None:
        return "no limit of its own"
    if row["fixed"]:
        return "within Azure's limit (fixed)"
    if row["declared"] is not None:
        return "within the declared quota"
    if row["exceedsDefault"]:
        return (f"past Azure's default of {row['azureDefault']:,} (it varies by offer): check `az network list-usages` "
                f"and declare cluster.resourceQuota.{row['key']}")
    return "within Azure's default"


def limit_status_text(limit: dict[str, Any]) -> str:
    """The status of one limit row, without markup (summary and report colour it)."""
    if limit["pastFixed"]:
        return f"{FIXED_TEXT}; relies on a declared Azure exception: {limit['exception']}"
    if limit["used"] is None:
        return "does not apply to this stack"
    if limit["raised"]:
        return f"relies on a raised limit: {limit['note']}"
    if limit["exceedsDefault"]:
        return "exceeds the default"
    return "within the default"


def node_images_data(plan: ClusterPlan) -> dict[str, Any]:
    """Which image version every scale set and VM boots, and what this stack builds (docs/images.md)."""
    images = plan.images
    return {
        "builds": images.builds,
        "versions": [{"definition": v.image.definition, "version": v.image.version, "builtHere": v.built_here,
                      "replicas": v.replicas if v.built_here else None, "vms": v.vms, "machines": list(v.machines)}
                     for v in images.versions],
        "machines": {name: str(image) for name, image in images.machines.items()},
    }


def limit_usage(plan: ClusterPlan) -> dict[str, int | None]:
    """What the plan uses of each Azure limit the catalogue knows; None where the limit does not apply."""
    ib = [s.capacity for p in plan.pools for s in p.scale_sets if s.infiniband]
    large = [s.capacity for p in plan.pools for s in p.scale_sets if not s.infiniband]
    return {
        "privateIpsPerNic": max((node_addressing(p.spec).ip_configurations for p in plan.pools), default=0),
        "privateIpsPerVnet": plan.ip.capacity.entries.vnet,
        # only with a peered hub: this VNet's entries plus network.hubAddressEntries
        "privateIpsPerPeeredGroup": plan.ip.capacity.entries.peered_group,
        "subnetsPerVnet": len(plan.ip.blocks),
        "vmsPerInfinibandDomain": max(ib, default=0),
        "vmsPerLargeScaleSet": max(large, default=0),
        "natGatewayPublicIps": plan.egress.public_ips,
    }


def report_data(plan: ClusterPlan, stack: str, resource_types: Counter[str], violations: list[Violation],
                outputs: dict[str, Any] | None = None) -> dict[str, Any]:
    spec, cp, ip = plan.spec, plan.control_plane, plan.ip
    zones = tuple(spec.zones)
    usage = limit_usage(plan)
    pools = [_pool(p, zones, plan.images) for p in plan.pools]
    return {
        "schemaVersion": SCHEMA_VERSION,
        "stack": stack,
        "cluster": {"name": spec.name, "location": spec.location, "zones": list(zones),
                    "kubernetesVersion": spec.kubernetes_version},
        "totals": {"nodes": plan.nodes, "gpus": plan.gpus, "vcpus": sum(p["vcpus"] for p in pools),
                   "memoryGib": sum(p["memoryGib"] for p in pools),
                   "infinibandDomains": sum(len(p["scaleSets"]) for p in pools if p["infiniband"]),
                   "resources": sum(resource_types.values())},
        "resources": dict(sorted(resource_types.items())),
        "pools": pools,
        "zones": {z: {key: sum(p["zones"][z][key] for p in pools) for key in ("nodes", "gpus", "vcpus", "memoryGib")}
                  for z in zones},
        "ipPlan": {
            "addressSpace": [str(a) for a in ip.address_space], "serviceCidr": str(ip.service_cidr),
            "dnsServiceIp": str(ip.dns_service_ip), "apiServerIp": str(ip.api_server_ip),
            "blocks": [{"name": b.name, "cidr": str(b.cidr), "purpose": b.purpose, "ipsNeeded": b.ips_needed,
                        "usable": b.usable, "pinned": b.pinned, "headroomIps": b.headroom_ips,
                        "headroomMembers": b.headroom_members} for b in ip.blocks],
            "unpinned": [b.name for b in ip.unpinned],
            "pins": ip.pins,
            "podIps": {"needed": ip.capacity.pod_ips_needed, "available": ip.capacity.pod_ip_capacity,
                       "headroom": ip.capacity.headroom, "headroomPct": round(ip.capacity.headroom_pct, 1)},
            "privateIps": {"needed": ip.capacity.private_ips_needed, "limit": ip.capacity.private_ip_limit},
            "podIpsOnNodes": ip.capacity.pod_ips_on_nodes,
            "entries": {"vnet": ip.capacity.entries.vnet, "peeredGroup": ip.capacity.entries.peered_group,
                        "limit": ip.capacity.private_ip_limit,
                        "peeredGroupLimit": plan.limits["privateIpsPerPeeredGroup"].value,
                        "lines": [{"what": line.what, "members": line.members, "each": line.entries_each,
                                   "entries": line.entries} for line in ip.capacity.entries.lines]},
            "podAddresses": {p.name: p.spec.pod_addresses for p in plan.pools},
            "prefixOnNic": {"pools": [p.name for p in plan.pools if node_addressing(p.spec).prefix_mode],
                            "onboarding": spec.network.prefix_on_nic_onboarding},
        },
        "controlPlane": {
            "apiServers": {"count": cp.api.count, "vmSize": cp.api.size.name, "zones": list(cp.api.zones),
                           "perZone": {z: cp.api.in_zone(z) for z in zones}, "reasoning": cp.api.reasoning,
                           "vcpus": cp.api.size.vcpus, "memoryGib": cp.api.size.memory_gib,
                           "heapGb": round(cp.api.heap_gb, 1), "memoryNeededGib": round(cp.api.memory_needed_gib, 1),
                           "vcpusNeeded": cp.api.vcpus_needed, "overridden": cp.api.overridden},
            "etcd": _etcd(cp.etcd), "eventsEtcd": _etcd(cp.events), "load": _load(cp.load),
        },
        "agentLoad": _agent_load(plan.agent_load),
        "zoneLoss": [{"zone": z, "gpusLost": sum(p["zones"][z]["gpus"] for p in pools),
                      "nodesLost": sum(p["zones"][z]["nodes"] for p in pools),
                      "etcd": _etcd_left(cp.etcd, z), "eventsEtcd": _etcd_left(cp.events, z),
                      "apiServers": {"left": cp.api.count - cp.api.in_zone(z), "of": cp.api.count}} for z in zones],
        "quota": [{"family": q.family, "vcpus": q.vcpus, "declared": q.declared, "shortBy": q.short_by}
                  for q in plan.quota],
        "resourceQuota": [{"key": c.quota.key, "description": c.quota.description, "needed": c.needed,
                           "declared": c.declared, "azureDefault": c.quota.default, "fixed": c.quota.fixed,
                           "shortBy": c.short_by, "exceedsDefault": c.exceeds_default, "source": c.quota.source}
                          for c in plan.counts],
        "limits": [{"key": limit.key, "description": limit.description, "used": usage.get(limit.key),
                    "default": limit.default, "value": limit.value, "raised": limit.raised, "note": limit.note,
                    "fixed": limit.fixed, "pastFixed": limit.past_fixed, "exception": limit.exception,
                    "source": limit.source,
                    "exceedsDefault": (usage.get(limit.key) or 0) > limit.default}
                   for limit in plan.limits.by_key.values()],
        "egress": {"prefixLength": plan.egress.prefix_length, "publicIps": plan.egress.public_ips,
                   "snatPorts": plan.egress.snat_ports, "nodes": plan.egress.nodes,
                   "snatPortsPerNode": plan.egress.snat_ports_per_node,
                   "publicIpsNeeded": plan.egress.public_ips_needed,
                   "idleTimeoutMinutes": plan.egress.idle_timeout_minutes},
        "scheduling": scheduling_data(plan),
        "balloons": balloons_data(plan),
        "metrics": metrics_data(plan),
        "policies": {"mandatory": sum(v.mandatory for v in violations),
                     "advisory": sum(not v.mandatory for v in violations),
                     "violations": [v.as_dict() for v in violations]},
        "versions": versions_data(plan),
        "nodeImages": node_images_data(plan),
        "firstBoot": bring_up_data(plan),
        "cniUpdate": {"nodes": plan.cni_update.nodes, "secondsPerAgent": plan.cni_update.seconds_per_agent,
                       "targetHours": plan.cni_update.target_hours,
                       "maxUnavailable": plan.cni_update.max_unavailable,
                       "hours": round(plan.cni_update.hours, 2), "model": plan.cni_update.text},
        "nodePods": node_pods_data(plan),
        "bootstrapTokens": tokens_data(plan),
        "cost": cost_data(plan),
        "rollout": rollout_data(plan),
        "outputs": outputs or {},
        "acknowledgeDeletions": {"teams": list(spec.acknowledge_deletions.teams),
                                 "infinibandDomains": list(spec.acknowledge_deletions.infiniband_domains)},
    }


def load_text(load: dict[str, Any]) -> str:
    """The sizing model's inputs in one paragraph: objects per kind, the serving cost per node, its sources."""
    kinds = ", ".join(f"{k['kind']} {k['count']:,} x {k['bytesEach']:,} B" for k in load["kinds"])
    past = f"; past the tested envelope: {', '.join(load['pastEnvelope'])}" if load["pastEnvelope"] else ""
    return (f"API-server heap ~{load['heapGb']:.0f} GB = {load['objectsGb']:.1f} GB of objects ({kinds}) + "
            f"{load['servingMbPerNode']:.1f} MB x {load['nodes']:,} nodes (from {load['anchor']}){past}")
