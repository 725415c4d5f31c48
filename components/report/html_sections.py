"""report.html sections for what the plan decides beyond the machines: control-plane sizing, team queues and
their quotas, balloons, egress. Each reads only summary data (report_data())."""

from __future__ import annotations

from html import escape
from typing import Any

from gpucluster.report.html_table import n, table
from gpucluster.report.report_data import load_text

Data = dict[str, Any]


def _quota(quota: Data | None) -> str:
    if quota is None:
        return "none"
    parts = [f"{n(quota['gpus'])} GPUs" if quota["gpus"] else "", f"{n(quota['cpus'])} vCPUs" if quota["cpus"] else "",
             f"{n(quota['memoryGib'])} GiB" if quota["memoryGib"] else ""]
    return ", ".join(p for p in parts if p) or "0"


def control_plane_section(data: Data) -> list[str]:
    cp = data["controlPlane"]
    api = cp["apiServers"]
    rows = [["API servers", str(api["count"]), escape(api["vmSize"]), n(api["vcpus"]), n(api["memoryGib"]),
             n(api["vcpusNeeded"]), f"{api['memoryNeededGib']:.0f}", f"heap ~{api['heapGb']:.0f} GB", "-",
             escape(api["reasoning"])]]
    for etcd in (cp["etcd"], cp["eventsEtcd"]):
        if etcd:
            rows.append([escape(etcd["role"]), f"{len(etcd['members'])} (quorum {etcd['quorum']})",
                         escape(etcd["vmSize"]), n(etcd["vcpus"]), n(etcd["memoryGib"]), "-",
                         f"{etcd['memoryNeededGib']:.0f}", f"quota-backend {etcd['quotaBackendGib']:g} GiB",
                         "local NVMe" if etcd["dataOnNvme"] else "Premium SSD v2", escape(etcd["reasoning"])])
    out = ["<h2>Control plane sizing</h2>", table(
        ["tier", "members", "size", "vCPUs", "memory GiB", "vCPUs needed", "memory needed GiB", "sized for", "data",
         "why this size"], rows, left=3, left_last=True)]
    if cp.get("load"):
        out.append(f"<p>{escape(load_text(cp['load']))}</p>")
    return out


def agent_load_section(data: Data) -> list[str]:
    load = data.get("agentLoad")
    if not load:
        return []
    rows = [[escape(f"{a['namespace']}/{a['name']}"), escape(a["serviceAccount"]), n(a["nodes"]),
             "not modelled" if a["callsPerMinute"] is None else f"{a['callsPerMinute']:g}",
             "-" if a["requestsPerSecond"] is None else f"{a['requestsPerSecond']:,.1f}", escape(a["source"])]
            for a in load["agents"]]
    return [f"<h2>Node agents and API Priority and Fairness</h2><p>Level {escape(load['level'])}: "
            f"{load['seatsNeeded']:,.0f} of {n(load['seats'])} seats ({load['seatsPerServer']} on each of "
            f"{load['servers']} API servers left after losing a zone). Seats: {escape(load['seatsSource'])}; a request "
            f"holds its seat up to 1 s: {escape(load['latencySource'])}.</p>",
            table(["agent", "service account", "nodes", "calls/min per pod", "requests/s", "rate from"], rows,
                  left=2, left_last=True)]


def teams_section(data: Data) -> list[str]:
    s = data["scheduling"]
    if not s["teams"]:
        return ["<h2>Teams and quotas</h2>", "<p>No team queues: cluster.teams is empty.</p>"]
    rows = [[escape(t["name"]), escape(t["namespace"]), str(t["weight"]), escape(q["flavor"]), n(q["nominal"]["gpus"]),
             n(q["nominal"]["cpus"]), n(q["nominal"]["memoryGib"]), escape(_quota(q["borrowingLimit"])),
             escape(_quota(q["lendingLimit"]))] for t in s["teams"] for q in t["flavors"]]
    nominal: dict[str, dict[str, int]] = {}
    for team in s["teams"]:
        for q in team["flavors"]:
            total = nominal.setdefault(q["flavor"], {"gpus": 0, "cpus": 0, "memoryGib": 0})
            for key in total:
                total[key] += q["nominal"][key]
    flavors = [[escape(f["name"]), escape(f["pool"]), escape(f["topology"] or "-"), escape(_quota(f["capacity"])),
                escape(_quota(nominal.get(f["name"]))),
                escape(", ".join(s["oversubscribed"].get(f["name"], [])) or "no")] for f in s["flavors"]]
    return [f"<h2>Teams and quotas (Kueue cohort {escape(s['cohort'])})</h2>", table(
        ["team", "namespace", "fair-share weight", "flavor", "GPUs", "vCPUs", "memory GiB", "may borrow",
         "may lend"], rows, left=4, left_last=True),
        table(["flavor", "pool", "topology", "capacity", "nominal quota of all teams", "oversubscribed"], flavors,
              left=6)]


def balloons_section(data: Data) -> list[str]:
    balloons = data["balloons"]
    if not balloons:
        return ["<h2>Balloons</h2>", "<p>No balloons: cluster.balloons is empty (no warm spare nodes).</p>"]
    rows = [[escape(b["name"]), escape(b["pool"]), f"{n(b['replicas'])} of {n(b['poolNodes'])} nodes", n(b["gpus"]),
             f"{b['cpuMillis'] / 1000:g}", f"{b['memoryMib'] / 1024:.1f}", escape(b["priorityClass"])] for b in balloons]
    return ["<h2>Balloons (warm spare nodes a real pod preempts)</h2>", table(
        ["balloon", "pool", "replicas", "GPUs each", "CPUs each", "memory GiB each", "priority class"], rows, left=2,
        left_last=True)]


def egress_section(data: Data) -> list[str]:
    e = data["egress"]
    return ["<h2>Egress</h2>", table(
        ["NAT gateway prefix", "public IPs", "needed", "SNAT ports", "nodes", "ports per node", "idle timeout min"],
        [[f"/{e['prefixLength']}", n(e["publicIps"]), n(e["publicIpsNeeded"]), n(e["snatPorts"]), n(e["nodes"]),
          n(e["snatPortsPerNode"]), n(e["idleTimeoutMinutes"])]])]
