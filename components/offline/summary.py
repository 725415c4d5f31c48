"""The plan summary a reviewer reads: resources, pools and zones, the IP plan, limits, quota, policies."""

from __future__ import annotations

from collections import Counter

from rich.console import Console
from rich.table import Table

from components.offline.engine import ProgramRun
from components.offline.policy_runner import SEVERITY_ORDER, Violation
from components.planning.cluster_plan import ClusterPlan
from components.planning.control_plane import EtcdPlan
from components.planning.node_template import node_taints


def _resources(run: ProgramRun) -> Table:
    table = Table(title=f"Resources ({sum(1 for r in run.registrations if r.custom)} custom)", title_justify="left")
    table.add_column("type")
    table.add_column("count", justify="right")
    for typ, count in sorted(Counter(r.type for r in run.registrations if r.custom).items()):
        table.add_row(typ, str(count))
    return table


def _pools(plan: ClusterPlan) -> Table:
    zones = plan.spec.zones
    table = Table(title=f"Node pools: {plan.nodes:,} nodes, {plan.gpus:,} GPUs", title_justify="left")
    for column in ("pool", "kind", "size", "scale sets", "max/set", "nodes", "GPUs"):
        table.add_column(column, justify="left" if column in ("pool", "kind", "size") else "right")
    for zone in zones:
        table.add_column(f"zone {zone}: sets, nodes / GPUs", justify="right")
    for pool in plan.pools:
        per_zone = [f"{sum(1 for s in pool.scale_sets if s.zone == z)}: "
                    f"{pool.nodes_in_zone(z):,} / {pool.nodes_in_zone(z) * pool.size.gpus:,}" for z in zones]
        kind = pool.role + (" (InfiniBand)" if pool.infiniband else "")
        table.add_row(pool.name, kind, pool.size.name, str(len(pool.scale_sets)), str(pool.max_per_scale_set),
                      f"{pool.nodes:,}", f"{pool.gpus:,}", *per_zone)
    return table


def _ip_plan(plan: ClusterPlan) -> Table:
    cap = plan.ip.capacity
    table = Table(title=f"IP plan: {', '.join(map(str, plan.ip.address_space))}; services {plan.ip.service_cidr} "
                        f"(DNS {plan.ip.dns_service_ip})", title_justify="left")
    for column in ("block", "CIDR", "holds", "IPs needed", "usable"):
        table.add_column(column, justify="right" if column in ("IPs needed", "usable") else "left")
    for block in plan.ip.blocks:
        table.add_row(block.name + (" (pinned)" if block.pinned else ""), str(block.cidr), block.purpose,
                      f"{block.ips_needed:,}", f"{block.usable:,}")
    table.caption = (f"pod IPs: {cap.pod_ips_needed:,} needed, {cap.pod_ip_capacity:,} available, headroom "
                     f"{cap.headroom:,} ({cap.headroom_pct:.0f}%); VNet private IPs: {cap.private_ips_needed:,} "
                     f"of {cap.private_ip_limit:,}")
    table.caption_justify = "left"
    return table


def _control_plane(plan: ClusterPlan) -> Table:
    cp = plan.control_plane
    api, etcds = cp.api, [e for e in (cp.etcd, cp.events) if e is not None]
    table = Table(title="Control plane (outside the cluster)", title_justify="left")
    for column in ("tier", "members", "size", *(f"zone {z}" for z in plan.spec.zones), "why this size"):
        table.add_column(column)
    table.add_row("API servers", str(api.count), api.size.name,
                  *(str(api.in_zone(z)) for z in plan.spec.zones), api.reasoning)
    for etcd in etcds:
        table.add_row(etcd.role, f"{len(etcd.members)} (quorum {etcd.quorum})", etcd.size.name,
                      *(str(etcd.in_zone(z)) for z in plan.spec.zones), etcd.reasoning)
    return table


def _etcd_left(etcd: EtcdPlan | None, zone: str) -> str:
    if etcd is None:
        return "-"
    ok = "quorum holds" if etcd.survives_loss_of(zone) else "[red]QUORUM LOST[/red]"
    return f"{len(etcd.members) - etcd.in_zone(zone)}/{len(etcd.members)} ({ok})"


def _zone_loss(plan: ClusterPlan) -> Table:
    cp = plan.control_plane
    table = Table(title="If a zone is lost", title_justify="left")
    for column in ("zone", "GPUs lost", "etcd left", "events etcd left", "API servers left"):
        table.add_column(column)
    for zone in plan.spec.zones:
        gpus = sum(p.nodes_in_zone(zone) * p.size.gpus for p in plan.pools)
        table.add_row(zone, f"{gpus:,}", _etcd_left(cp.etcd, zone), _etcd_left(cp.events, zone),
                      f"{cp.api.count - cp.api.in_zone(zone)}/{cp.api.count}")
    return table


def _quota(plan: ClusterPlan) -> Table:
    table = Table(title="vCPU quota needed per family", title_justify="left")
    for column in ("family", "vCPUs needed", "declared quota", "short by"):
        table.add_column(column, justify="left" if column == "family" else "right")
    for need in plan.quota:
        declared = f"{need.declared:,}" if need.declared is not None else "not declared"
        table.add_row(need.family, f"{need.vcpus:,}", declared, f"{need.short_by:,}" if need.short_by else "")
    return table


def _confidential(plan: ClusterPlan) -> Table | None:
    pools = [p for p in plan.pools if p.confidential is not None]
    if not pools:
        return None
    table = Table(title="Confidential pools", title_justify="left")
    for column in ("pool", "security type", "secure boot / vTPM", "OS-disk encryption", "keys", "image",
                   "accelerated networking", "InfiniBand", "taint"):
        table.add_column(column, overflow="fold")
    for pool in pools:
        c = pool.confidential
        assert c is not None
        keys = (f"customer-managed (RSA-HSM, release to attested CVMs via {c.customer_key.attestation_authority})"
                if c.customer_key else "platform-managed")
        taints = ", ".join(f"{t.key}={t.value}:{t.effect}" for t in node_taints(pool))
        table.add_row(pool.name, c.security_type, f"{'on' if c.secure_boot else 'off'} / {'on' if c.vtpm else 'off'}",
                      c.os_disk_encryption, keys, f"{c.image.offer}:{c.image.sku}",
                      "on" if pool.accelerated_networking else "off", "on" if pool.infiniband else "off", taints)
    return table


def print_summary(console: Console, plan: ClusterPlan, run: ProgramRun, violations: list[Violation]) -> None:
    spec = plan.spec
    console.print(f"[bold]gpucluster plan[/bold] stack [bold]{run.stack}[/bold]: cluster {spec.name} in "
                  f"{spec.location} zones {', '.join(spec.zones)}, Kubernetes {spec.kubernetes_version}")
    console.print(_resources(run))
    console.print(_pools(plan))
    confidential = _confidential(plan)
    if confidential is not None:
        console.print(confidential)
    console.print(_ip_plan(plan))
    console.print(_control_plane(plan))
    console.print(_zone_loss(plan))
    raised = plan.limits.raised()
    if raised:
        console.print("[bold]Raised Azure limits this stack relies on[/bold]")
        for limit in raised:
            console.print(f"  {limit.key}: {limit.value:,} (default {limit.default:,}) - {limit.note}")
    egress = plan.egress
    console.print(f"Egress: NAT gateway with a /{egress.prefix_length} prefix ({egress.public_ips} public IPs, "
                  f"{egress.snat_ports:,} SNAT ports for {egress.nodes:,} nodes x {egress.snat_ports_per_node})")
    console.print(_quota(plan))
    print_violations(console, violations)


def print_violations(console: Console, violations: list[Violation]) -> None:
    if not violations:
        console.print("[green]Policies: no violations[/green]")
        return
    order = list(SEVERITY_ORDER)
    for severity in sorted({v.severity for v in violations}, key=lambda s: order.index(s) if s in order else 9):
        group = [v for v in violations if v.severity == severity]
        console.print(f"[bold red]{severity.upper()}[/bold red] ({len(group)})")
        for v in group:
            # soft_wrap: one line per fact, so CI logs stay greppable
            console.print(f"  [{v.enforcement}] {v.policy}: {v.message}", markup=False, soft_wrap=True)
            console.print(f"      resource: {v.urn or '(stack)'}", markup=False, soft_wrap=True)
            if v.remediation:
                console.print(f"      fix: {v.remediation}", markup=False, soft_wrap=True)
    mandatory = sum(v.mandatory for v in violations)
    verdict = "[bold red]must not be deployed[/bold red]" if mandatory else "[green]may be deployed[/green]"
    console.print(f"Policies: {mandatory} mandatory, {len(violations) - mandatory} advisory: the stack {verdict}")
