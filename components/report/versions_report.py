"""The version table as the plan uses it: data for summary.json / report.html, and the terminal lines.

The data holds dates only (byte-identical output for the same input); days left are computed when printing.
"""

from __future__ import annotations

from datetime import date
from typing import Any

from rich.console import Console
from rich.table import Table

from gpucluster.offline.removals import KEY as REMOVALS_KEY
from gpucluster.offline.removals import removals_line
from gpucluster.planning.cluster_plan import ClusterPlan
from gpucluster.planning.versions import WARN_DAYS

Data = dict[str, Any]


def versions_data(plan: ClusterPlan) -> Data:
    v = plan.versions
    verified = {"patchVerified": v.patch_verified, "tableLatestPatch": v.release.latest_patch} if v.patch_verified else {}
    return {
        "kubernetes": {"version": v.kubernetes_version, "minor": v.minor,
                       "maintenanceStart": v.release.maintenance_start.isoformat(),
                       "endOfLife": v.release.end_of_life.isoformat(), "source": v.release.source, **verified},
        "components": [{"name": c.name, "version": c.version, "minors": list(c.minors),
                        "endOfLife": c.end_of_life.isoformat() if c.end_of_life else None,
                        "inCluster": c.in_cluster, "source": c.source} for c in v.components],
    }


def bring_up_data(plan: ClusterPlan) -> list[Data]:
    boot = plan.bring_up
    return [] if boot is None else [{"step": s.step, "workload": s.workload, "pools": list(s.pools)}
                                    for s in boot.steps]


def node_pods_data(plan: ClusterPlan) -> list[Data]:
    """Per pool: the per-node system pods the bring-up placed, against maxPods and the NIC's pod addresses."""
    boot = plan.bring_up
    return [] if boot is None else [
        {"pool": n.pool, "systemPods": n.system_pods, "podNetworkPods": n.pod_network_pods, "maxPods": n.max_pods,
         "podAddresses": n.pod_addresses, "freePods": n.free_pods, "workPodsPerNode": n.work_pods,
         "daemonSets": list(n.daemonsets)} for n in boot.node_pods]


def print_bring_up(console: Console, steps: list[Data]) -> None:
    if not steps:
        return
    table = Table(title="First boot: when each workload can start, and where", title_justify="left")
    for column in ("step", "workload", "pools"):
        table.add_column(column, overflow="fold")
    for s in steps:
        table.add_row(str(s["step"]), s["workload"], ", ".join(s["pools"]))
    console.print(table)


def version_warnings(data: Data, today: date, warn_days: int = WARN_DAYS) -> list[str]:
    k = data["kubernetes"]
    confirmed = [f"Kubernetes {k['version']} is newer than the version table's {k['tableLatestPatch']}; the stack "
                 f"confirms it (cluster.kubernetesPatchVerified): {k['patchVerified']}"] if k.get("patchVerified") else []
    return confirmed + _end_of_life(k, today, warn_days)


def _end_of_life(k: Data, today: date, warn_days: int) -> list[str]:
    left = (date.fromisoformat(k["endOfLife"]) - today).days
    if left < 0:
        return [f"Kubernetes {k['minor']} reached end of life on {k['endOfLife']}: no security fixes; "
                "upgrade the minor (docs/operations.md)"]
    if left <= warn_days:
        return [f"Kubernetes {k['minor']} reaches end of life on {k['endOfLife']}, in {left} days: "
                "plan the minor upgrade (docs/operations.md)"]
    return []


def print_versions(console: Console, data: Data, today: date | None = None, tables: bool = True) -> None:
    """The versions and first-boot tables (with `tables`), then what to act on: end-of-life warnings, removals."""
    versions = data["versions"]
    k = versions["kubernetes"]
    if tables:
        table = Table(title=f"Versions: Kubernetes {k['version']} (end of life {k['endOfLife']})", title_justify="left")
        for column in ("component", "version", "Kubernetes minors"):
            table.add_column(column, overflow="fold")
        for c in versions["components"]:
            table.add_row(c["name"], c["version"], ", ".join(c["minors"]))
        console.print(table)
        print_bring_up(console, data.get("firstBoot", []))
    for warning in version_warnings(versions, today or date.today()):
        console.print(f"[bold yellow]WARNING[/bold yellow] {warning}")
    if (removals := data.get(REMOVALS_KEY)) is not None:
        console.print(removals_line(removals), soft_wrap=True, markup=False, highlight=False)
