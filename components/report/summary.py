"""The plan summary a reviewer reads in the terminal, rendered from report_data()."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from gpucluster.offline.policy_runner import SEVERITY_ORDER, Violation
from gpucluster.preflight.fold import merged_message, names_text
from gpucluster.report.cost_report import print_cost
from gpucluster.report.lifetimes_report import print_tokens
from gpucluster.report.metrics_report import print_metrics
from gpucluster.report.report_data import (
    count_status_text,
    entries_text,
    headroom_text,
    limit_status_text,
    load_text,
    prerequisite_text,
    unpinned_text,
)
from gpucluster.report.rollout_report import print_rollout
from gpucluster.report.versions_report import print_versions

Data = dict[str, Any]


def _table(title: str, columns: list[str], left: int = 1) -> Table:
    table = Table(title=title, title_justify="left")
    for i, column in enumerate(columns):
        table.add_column(column, justify="left" if i < left else "right", overflow="fold")
    return table


def _resources(data: Data) -> Table:
    table = _table(f"Resources ({data['totals']['resources']} custom)", ["type", "count"])
    for typ, count in data["resources"].items():
        table.add_row(typ, str(count))
    return table


def _amounts(a: Data) -> list[str]:
    return [f"{a['nodes']:,}", f"{a['gpus']:,}", f"{a['vcpus']:,}", f"{a['memoryGib']:,}"]


def _pools(data: Data) -> Table:
    t = data["totals"]
    table = _table(f"Node pools: {t['nodes']:,} nodes, {t['gpus']:,} GPUs, {t['vcpus']:,} vCPUs, "
                   f"{t['memoryGib']:,} GiB", ["pool", "kind", "size", "scale sets", "max/set", "nodes", "GPUs",
                                               "vCPUs", "memory GiB"], left=3)
    for pool in data["pools"]:
        kind = pool["kind"] + (" (InfiniBand)" if pool["infiniband"] else "")
        table.add_row(pool["name"], kind, pool["vmSize"], str(len(pool["scaleSets"])), str(pool["maxPerScaleSet"]),
                      *_amounts(pool))
    return table


def _zones(data: Data) -> Table:
    table = _table("Per zone: scale sets / nodes / GPUs / vCPUs / memory GiB",
                   ["pool", *(f"zone {z}" for z in data["cluster"]["zones"])])
    for pool in data["pools"]:
        table.add_row(pool["name"], *(f"{a['scaleSets']} / " + " / ".join(_amounts(a))
                                      for a in pool["zones"].values()))
    table.add_row("[bold]all pools[/bold]", *(" - / " + " / ".join(_amounts(a)) for a in data["zones"].values()))
    return table


def _racks(data: Data) -> Table | None:
    """NVLink racks per zone: each rack is one NVLink domain of subgroupSize VMs (docs/rack-scale.md)."""
    pools = [p for p in data["pools"] if p.get("racks")]
    if not pools:
        return None
    table = _table("NVLink racks per zone: racks (NVLink domains) / GPUs; spare racks per zone",
                   ["pool", "interconnect groups", "GPUs per rack", *(f"zone {z}" for z in data["cluster"]["zones"]),
                    "spare per zone"], left=2)
    for pool in pools:
        racks = pool["racks"]
        groups = ", ".join(f"{g['name']} (zone {g['zone']}, {g['racks']} racks, block {g['blockCapacity']} VMs)"
                           for g in racks["groups"])
        table.add_row(pool["name"], groups, str(racks["gpusPerRack"]),
                      *(f"{a['racks']} / {a['gpus']:,}" for a in racks["zones"].values()), str(racks["sparePerZone"]))
    return table


def _confidential(data: Data) -> Table | None:
    pools = [p for p in data["pools"] if p["confidential"]]
    if not pools:
        return None
    table = _table("Confidential pools", ["pool", "security type", "secure boot / vTPM", "OS-disk encryption",
                                          "keys", "image", "InfiniBand", "taints"], left=8)
    for pool in pools:
        c = pool["confidential"]
        table.add_row(pool["name"], c["securityType"], f"{'on' if c['secureBoot'] else 'off'} / "
                      f"{'on' if c['vtpm'] else 'off'}", c["osDiskEncryption"], c["keys"], c["image"],
                      "on" if pool["infiniband"] else "off", ", ".join(pool["taints"]))
    return table


def _node_images(data: Data) -> Table | None:
    """Which image version every scale set and VM boots: one row per version, the machines in it."""
    images = data.get("nodeImages")
    if not images:
        return None
    table = _table("Node images (docs/images.md)", ["image", "version", "built by this stack",
                                                     "scale sets and VMs that boot it", "VMs", "gallery replicas"], left=4)
    for v in images["versions"]:
        table.add_row(v["definition"], v["version"], "yes" if v["builtHere"] else "no (already in the gallery)",
                      ", ".join(v["machines"]), f"{v['vms']:,}", str(v["replicas"]) if v["replicas"] is not None else "-")
    return table


def _ip_plan(data: Data) -> Table:
    ip = data["ipPlan"]
    table = _table(f"IP plan: {', '.join(ip['addressSpace'])}; services {ip['serviceCidr']} (DNS {ip['dnsServiceIp']})",
                   ["block", "CIDR", "holds", "IPs needed", "usable", "room before full"], left=3)
    for block in ip["blocks"]:
        table.add_row(block["name"] + (" (pinned)" if block["pinned"] else ""), block["cidr"], block["purpose"],
                      f"{block['ipsNeeded']:,}", f"{block['usable']:,}", headroom_text(block))
    pods = ip["podIps"]
    table.caption = (f"pod IPs: {pods['needed']:,} needed, {ip['podIpsOnNodes']:,} on the nodes' NICs, "
                     f"{pods['available']:,} available, headroom {pods['headroom']:,} ({pods['headroomPct']:.0f}%); "
                     f"{entries_text(ip)}" + (f"\n{unpinned_text(ip)}" if ip["unpinned"] else ""))
    table.caption_justify = "left"
    return table


def _control_plane(data: Data) -> Table:
    cp, zones = data["controlPlane"], data["cluster"]["zones"]
    table = _table("Control plane (outside the cluster)", ["tier", "members", "size", *(f"zone {z}" for z in zones),
                                                           "why this size"], left=9)
    api = cp["apiServers"]
    table.add_row("API servers", str(api["count"]), api["vmSize"], *(str(api["perZone"][z]) for z in zones),
                  api["reasoning"])
    for etcd in (cp["etcd"], cp["eventsEtcd"]):
        if etcd:
            table.add_row(etcd["role"], f"{len(etcd['members'])} (quorum {etcd['quorum']})", etcd["vmSize"],
                          *(str(sum(m["zone"] == z for m in etcd["members"])) for z in zones), etcd["reasoning"])
    if cp.get("load"):
        table.caption = load_text(cp["load"])
        table.caption_justify = "left"
    return table



def _agent_load(data: Data) -> Table | None:
    load = data.get("agentLoad")
    if not load:
        return None
    table = _table(f"Node agents against API Priority and Fairness level {load['level']}: {load['seatsNeeded']:,.0f} "
                   f"of {load['seats']:,} seats ({load['seatsPerServer']} x {load['servers']} API servers left after "
                   "losing a zone)", ["agent", "service account", "nodes", "calls/min per pod", "requests/s"], left=2)
    for a in load["agents"]:
        unknown = a["callsPerMinute"] is None
        table.add_row(f"{a['namespace']}/{a['name']}", a["serviceAccount"], f"{a['nodes']:,}",
                      "not modelled" if unknown else f"{a['callsPerMinute']:g}",
                      "-" if unknown else f"{a['requestsPerSecond']:,.1f}")
    table.caption = (f"seats: {load['seatsSource']}; a request holds its seat up to 1 s: {load['latencySource']}; "
                     "'not modelled': the agent's request rate was not read from its source (docs/control-plane.md)")
    table.caption_justify = "left"
    return table


def _left(entry: Data | None) -> str:
    if entry is None:
        return "-"
    ok = "quorum holds" if entry["quorumHolds"] else "[red]QUORUM LOST[/red]"
    return f"{entry['left']}/{entry['of']} ({ok})"


def _zone_loss(data: Data) -> Table:
    table = _table("If a zone is lost", ["zone", "nodes lost", "GPUs lost", "etcd left", "events etcd left",
                                         "API servers left"], left=6)
    for z in data["zoneLoss"]:
        table.add_row(z["zone"], f"{z['nodesLost']:,}", f"{z['gpusLost']:,}", _left(z["etcd"]), _left(z["eventsEtcd"]),
                      f"{z['apiServers']['left']}/{z['apiServers']['of']}")
    return table


def _limits(data: Data) -> Table:
    table = _table("Azure limits", ["limit", "used", "default", "in force", "status"], left=1)
    table.columns[-1].justify = "left"
    for limit in data["limits"]:
        used = "n/a" if limit["used"] is None else f"{limit['used']:,}"
        status = limit_status_text(limit)
        if limit["pastFixed"]:
            status = f"[bold red]{status}[/bold red]"
        elif limit["raised"]:
            status = f"[yellow]{status}[/yellow]"
        elif limit["exceedsDefault"]:
            status = f"[red]{status}[/red]"
        table.add_row(limit["description"], used, f"{limit['default']:,}" + (" (fixed)" if limit["fixed"] else ""),
                      f"{limit['value']:,}", status)
    return table


def _quota(data: Data) -> Table:
    table = _table("vCPU quota needed per family", ["family", "vCPUs needed", "declared quota", "short by"])
    for need in data["quota"]:
        declared = f"{need['declared']:,}" if need["declared"] is not None else "not declared"
        family = "cores (Total Regional vCPUs)" if need["family"] == "cores" else need["family"]
        table.add_row(family, f"{need['vcpus']:,}", declared, f"{need['shortBy']:,}" if need["shortBy"] else "")
    return table


def _counts(data: Data) -> Table:
    table = _table(f"Per-subscription counts in {data['cluster']['location']}",
                   ["what", "needed", "declared quota", "Azure's default or limit", "status"])
    table.columns[-1].justify = "left"
    for row in data["resourceQuota"]:
        declared = (f"{row['declared']:,}" if row["declared"] is not None
                    else "-" if row["fixed"] or row["azureDefault"] is None else "not declared")
        default = "none" if row["azureDefault"] is None else f"{row['azureDefault']:,}" + (
            " (fixed)" if row["fixed"] else "")
        status = count_status_text(row)
        table.add_row(row["description"], f"{row['needed']:,}", declared, default,
                      f"[yellow]{status}[/yellow]" if row["exceedsDefault"] else status)
    return table


def print_summary(console: Console, data: Data, violations: list[Violation], details: bool = False) -> None:
    """What a reviewer reads: pools, zones, the IP plan, the control plane, zone loss, limits and quota, egress, the
    token, warnings and the policies. `details` (`plan --details`) adds the resources by type, the node images per
    scale set, the node agents' API load and the versions and first-boot tables; report.html and summary.json
    always carry everything."""
    c = data["cluster"]
    console.print(f"[bold]gpucluster plan[/bold] stack [bold]{data['stack']}[/bold]: cluster {c['name']} in "
                  f"{c['location']} zones {', '.join(c['zones'])}, Kubernetes {c['kubernetesVersion']}")
    tables = [_resources(data) if details else None, _pools(data), _zones(data), _racks(data), _confidential(data),
              _node_images(data) if details else None, _ip_plan(data), _control_plane(data),
              _agent_load(data) if details else None, _zone_loss(data), _limits(data), _quota(data), _counts(data)]
    for table in tables:
        if table is not None:
            console.print(table)
    prerequisite = prerequisite_text(data["ipPlan"])
    if prerequisite:
        colour = "green" if data["ipPlan"]["prefixOnNic"]["onboarding"] else "yellow"
        console.print(f"[{colour}]{prerequisite}[/{colour}]", markup=True, soft_wrap=True)
    e = data["egress"]
    console.print(f"Egress: NAT gateway with a /{e['prefixLength']} prefix ({e['publicIps']} public IPs, "
                  f"{e['snatPorts']:,} SNAT ports for {e['nodes']:,} nodes x {e['snatPortsPerNode']})")
    print_metrics(console, data)
    if "cniUpdate" in data:
        console.print(data["cniUpdate"]["model"], markup=False, soft_wrap=True)
    for step in data.get("firstUp", {}).get("steps", []):
        console.print(f"First up, step {step['step']} ({step['resources']} resources), from {step['runsFrom']}: "
                      f"{step['command']}", markup=False, highlight=False, soft_wrap=True)
        if "runs" in step:
            console.print(f"  which runs there (out/<stack>/{step['script']}, log {step['log']}): {step['runs']}",
                          markup=False, highlight=False, soft_wrap=True)
    if "bootstrapTokens" in data:
        print_tokens(console, data["bootstrapTokens"])
    print_cost(console, data)
    print_rollout(console, data)
    if "versions" in data:
        print_versions(console, data, tables=details)
    print_violations(console, violations)


def folded_violations(violations: list[Violation]) -> list[tuple[Violation, list[Violation]]]:
    """Each mandatory violation on its own (each must be fixed); advisory ones of one policy folded into the
    first, with all of them alongside: one line per rule however many resources repeat it."""
    out: list[tuple[Violation, list[Violation]]] = []
    advisory: dict[str, list[Violation]] = {}
    for v in violations:
        if v.mandatory:
            out.append((v, [v]))
        elif v.source in advisory:
            advisory[v.source].append(v)
        else:
            advisory[v.source] = [v]
            out.append((v, advisory[v.source]))
    return out


def folded_text(group: list[Violation]) -> tuple[str, str]:
    """(message, resources) of a group: one violation as it is; several as the merged message and
    `43 resources: a, b, c +40 more` (by resource name)."""
    if len(group) == 1:
        return group[0].message, group[0].path or "(stack)"
    names = [v.path.rsplit("::", 1)[-1] if v.path else "(stack)" for v in group]
    return merged_message([v.message for v in group]), f"{len(group)} resources: {names_text(names)}"


def print_violations(console: Console, violations: list[Violation]) -> None:
    if not violations:
        console.print("[green]Policies: no violations[/green]")
        return
    order = list(SEVERITY_ORDER)
    for severity in sorted({v.policy_severity for v in violations}, key=lambda s: order.index(s) if s in order else 9):
        group = [v for v in violations if v.policy_severity == severity]
        console.print(f"[bold red]{severity.upper()}[/bold red] ({len(group)})")
        for v, repeats in folded_violations(group):
            message, resources = folded_text(repeats)
            # soft_wrap: one line per fact, so CI logs stay greppable
            console.print(f"  [{v.enforcement}] {v.source}: {message}", markup=False, soft_wrap=True)
            console.print(f"      resource: {resources}", markup=False, soft_wrap=True)
            if v.fix:
                console.print(f"      fix: {v.fix}", markup=False, soft_wrap=True)
    mandatory = sum(v.mandatory for v in violations)
    verdict = "[bold red]must not be deployed[/bold red]" if mandatory else "[green]may be deployed[/green]"
    console.print(f"Policies: {mandatory} mandatory, {len(violations) - mandatory} advisory: the stack {verdict}")
