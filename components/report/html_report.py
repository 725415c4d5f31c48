"""out/<stack>/report.html: one self-contained page (inline CSS and SVG, no scripts, no network) with a
picture of the cluster - region, zones, InfiniBand domains, control plane, IP blocks - and the summary."""

from __future__ import annotations

import ipaddress
from html import escape
from typing import Any

from gpucluster.diff.render import diff_section
from gpucluster.offline.policy_runner import Violation
from gpucluster.preflight.report import html_section
from gpucluster.report.cost_report import money
from gpucluster.report.html_cost import cost_section
from gpucluster.report.html_sections import (
    agent_load_section,
    balloons_section,
    control_plane_section,
    egress_section,
    teams_section,
)
from gpucluster.report.html_table import n, table
from gpucluster.report.metrics_report import metrics_section
from gpucluster.report.report_data import (
    count_status_text,
    entries_text,
    headroom_text,
    limit_status_text,
    prerequisite_text,
    unpinned_text,
)
from gpucluster.report.rollout_report import rollout_section
from gpucluster.report.summary import folded_text, folded_violations

Data = dict[str, Any]

BOX_W, BOX_H, GAP, PER_ROW = 88, 40, 6, 5
ZONE_W = PER_ROW * (BOX_W + GAP) + GAP + 10
POOL_COLOURS = {"gpu": "#7c3aed", "confidential": "#db2777", "cpu": "#0891b2", "system": "#64748b"}

CSS = """
body{font:14px/1.4 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#0f172a;background:#fff}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px}
.sub{color:#475569;margin-bottom:16px}.cards{display:flex;gap:12px;flex-wrap:wrap}
.card{border:1px solid #e2e8f0;border-radius:8px;padding:8px 14px;min-width:110px}
.card b{display:block;font-size:20px}.ok{color:#15803d}.bad{color:#b91c1c}.warn{color:#b45309}
table{border-collapse:collapse;margin:6px 0}th,td{border:1px solid #e2e8f0;padding:4px 8px;text-align:right}
th{background:#f8fafc}.l{text-align:left}
svg text{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif}
.legend span{display:inline-block;width:12px;height:12px;margin:0 4px 0 12px;vertical-align:middle;border-radius:2px}
"""


_n = n
_table = table


def _pool_sections(data: Data, zone: str) -> list[tuple[Data, list[Data]]]:
    return [(pool, [s for s in pool["scaleSets"] if s["zone"] == zone]) for pool in data["pools"]]


def _section_height(count: int) -> int:
    rows = max(1, -(-count // PER_ROW))
    return 22 + rows * (BOX_H + GAP)


def _zone_svg(data: Data, zone: str, x: int, y: int, height: int) -> list[str]:
    cp = data["controlPlane"]
    parts = [f'<rect x="{x}" y="{y}" width="{ZONE_W}" height="{height}" rx="10" fill="#f8fafc" stroke="#94a3b8"/>',
             f'<text x="{x + 10}" y="{y + 22}" font-size="15" font-weight="600">zone {escape(zone)}</text>',
             f'<text x="{x + ZONE_W - 10}" y="{y + 22}" font-size="12" text-anchor="end" fill="#475569">'
             f'{_n(data["zones"][zone]["nodes"])} nodes, {_n(data["zones"][zone]["gpus"])} GPUs</text>']
    cy = y + 36
    # control plane strip: API servers and etcd members in this zone
    members = [("API", cp["apiServers"]["perZone"][zone], "#0f766e")]
    for key, label in (("etcd", "etcd"), ("eventsEtcd", "events")):
        if cp[key]:
            members.append((label, sum(m["zone"] == zone for m in cp[key]["members"]), "#b45309"))
    cx = x + 10
    for label, count, colour in members:
        parts.append(f'<rect x="{cx}" y="{cy}" width="{(ZONE_W - 40) // 3}" height="26" rx="5" fill="{colour}"/>'
                     f'<text x="{cx + 8}" y="{cy + 17}" font-size="12" fill="#fff">{label} x{count}</text>')
        cx += (ZONE_W - 40) // 3 + 10
    cy += 38
    for pool, sets in _pool_sections(data, zone):
        colour = POOL_COLOURS.get(pool["kind"], "#334155")
        kind = "InfiniBand domains" if pool["infiniband"] else "scale sets"
        parts.append(f'<text x="{x + 10}" y="{cy + 14}" font-size="12" fill="#334155">{escape(pool["name"])} - '
                     f'{len(sets)} {kind}</text>')
        for i, s in enumerate(sets):
            bx = x + 10 + (i % PER_ROW) * (BOX_W + GAP)
            by = cy + 20 + (i // PER_ROW) * (BOX_H + GAP)
            gpus = f"{_n(s['gpus'])} GPU" if s["gpus"] else "CPU"
            parts.append(f'<g><title>{escape(s["name"])}: {s["capacity"]} VMs, {gpus}</title>'
                         f'<rect x="{bx}" y="{by}" width="{BOX_W}" height="{BOX_H}" rx="4" fill="{colour}"/>'
                         f'<text x="{bx + 5}" y="{by + 15}" font-size="10" fill="#fff">{escape(s["name"])}</text>'
                         f'<text x="{bx + 5}" y="{by + 31}" font-size="10" fill="#fff">{s["capacity"]} VM · {gpus}</text></g>')
        cy += _section_height(len(sets))
    return parts


def cluster_picture(data: Data) -> str:
    """Region -> zones -> scale sets (one box per InfiniBand domain), control plane per zone."""
    zones = data["cluster"]["zones"]
    height = 36 + 38 + max(sum(_section_height(len(sets)) for _, sets in _pool_sections(data, z)) for z in zones) + 10
    width = len(zones) * (ZONE_W + 16) + 16
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height + 56}" role="img" '
             f'aria-label="cluster layout">',
             f'<rect x="1" y="1" width="{width - 2}" height="{height + 54}" rx="12" fill="#fff" stroke="#0f172a"/>',
             f'<text x="16" y="28" font-size="16" font-weight="700">region {escape(data["cluster"]["location"])}'
             f' - {_n(data["totals"]["nodes"])} nodes, {_n(data["totals"]["gpus"])} GPUs, '
             f'{data["totals"]["infinibandDomains"]} InfiniBand domains</text>']
    for i, zone in enumerate(zones):
        parts += _zone_svg(data, zone, 16 + i * (ZONE_W + 16), 42, height)
    parts.append("</svg>")
    return "".join(parts)


def _block_colour(name: str, kinds: dict[str, str]) -> str:
    if name in kinds:
        return POOL_COLOURS.get(kinds[name], "#334155")
    return "#b45309" if name == "etcd" else "#0f766e"


def ip_picture(data: Data) -> str:
    """The address space as one bar, blocks at their offsets (at least 3 px wide so small ones show)."""
    width, bar_y = 1000, 30
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width + 20}" height="{bar_y + 50}" role="img" '
             'aria-label="IP plan">']
    spaces = [ipaddress.ip_network(s) for s in data["ipPlan"]["addressSpace"]]
    total = sum(s.num_addresses for s in spaces)
    offset_of: dict[str, int] = {}
    start = 0
    for space in spaces:
        offset_of[str(space)] = start
        start += space.num_addresses
    parts.append(f'<rect x="10" y="{bar_y}" width="{width}" height="28" fill="#e2e8f0"/>')
    kinds = {f"pool-{p['name']}": p["kind"] for p in data["pools"]}
    for block in data["ipPlan"]["blocks"]:
        net = ipaddress.ip_network(block["cidr"])
        space = next(s for s in spaces if net.subnet_of(s))  # type: ignore[arg-type]
        first = offset_of[str(space)] + int(net.network_address) - int(space.network_address)
        x = 10 + width * first / total
        w = max(3.0, width * net.num_addresses / total)
        parts.append(f'<g><title>{escape(block["name"])} {block["cidr"]}: {_n(block["ipsNeeded"])} IPs needed of '
                     f'{_n(block["usable"])}</title><rect x="{x:.1f}" y="{bar_y}" width="{w:.1f}" height="28" '
                     f'fill="{_block_colour(block["name"], kinds)}"/></g>')
        if w > 60:
            parts.append(f'<text x="{x + 4:.1f}" y="{bar_y + 18}" font-size="11" fill="#fff">{escape(block["name"])}</text>')
    parts.append(f'<text x="10" y="20" font-size="12" fill="#475569">{", ".join(map(str, spaces))} '
                 f'({_n(total)} addresses)</text></svg>')
    return "".join(parts)


def _cards(data: Data) -> str:
    t, pods, pol = data["totals"], data["ipPlan"]["podIps"], data["policies"]
    verdict = (f'<b class="bad">{pol["mandatory"]} mandatory</b>' if pol["mandatory"]
               else '<b class="ok">pass</b>')
    cards = [("nodes", _n(t["nodes"])), ("GPUs", _n(t["gpus"])), ("vCPUs", _n(t["vcpus"])),
             ("memory", f"{_n(t['memoryGib'])} GiB"), ("InfiniBand domains", str(t["infinibandDomains"])),
             ("pod IPs needed", _n(pods["needed"])), ("pod-IP headroom", f"{_n(pods['headroom'])} ({pods['headroomPct']:.0f}%)"),
             ("resources", _n(t["resources"]))]
    return ('<div class="cards">' + "".join(f'<div class="card"><b>{v}</b>{escape(k)}</div>' for k, v in cards)
            + f'<div class="card">{verdict}policies</div></div>')


def _left(entry: Data | None) -> str:
    if entry is None:
        return "-"
    cls, word = ("ok", "quorum holds") if entry["quorumHolds"] else ("bad", "QUORUM LOST")
    return f'{entry["left"]}/{entry["of"]} <span class="{cls}">{word}</span>'


def _limit_status(limit: Data) -> str:
    text = escape(limit_status_text(limit))
    if limit["pastFixed"]:
        return f'<span class="bad"><b>{text}</b></span>'
    if limit["raised"]:
        return f'<span class="warn">{text}</span>'
    if limit["exceedsDefault"]:
        return f'<span class="bad">{text}</span>'
    return text


def _node_images(data: Data) -> list[str]:
    """One row per image version: who boots it and whether this stack builds it (docs/images.md)."""
    images = data.get("nodeImages")
    if not images:
        return []
    return ["<h2>Node images</h2>", _table(
        ["image", "version", "built by this stack", "scale sets and VMs that boot it", "VMs", "gallery replicas"],
        [[escape(v["definition"]), escape(v["version"]), "yes" if v["builtHere"] else "no (already in the gallery)",
          escape(", ".join(v["machines"])), _n(v["vms"]), "-" if v["replicas"] is None else str(v["replicas"])]
         for v in images["versions"]], left=4)]


def _racks(data: Data) -> list[str]:
    """NVLink racks (docs/rack-scale.md): per zone, racks (one NVLink domain each) and their GPUs."""
    pools = [p for p in data["pools"] if p.get("racks")]
    if not pools:
        return []
    zones = data["cluster"]["zones"]
    return ["<h2>NVLink racks</h2>", _table(
        ["pool", "interconnect groups", "GPUs per rack (NVLink domain)",
         *(f"zone {z} racks / GPUs" for z in zones), "spare racks per zone"],
        [[escape(p["name"]), escape(", ".join(f"{g['name']} (zone {g['zone']}, {g['racks']} racks, block "
                                              f"{g['blockCapacity']} VMs)" for g in p["racks"]["groups"])),
          _n(p["racks"]["gpusPerRack"]),
          *(f'{_n(p["racks"]["zones"][z]["racks"])} / {_n(p["racks"]["zones"][z]["gpus"])}' for z in zones),
          _n(p["racks"]["sparePerZone"])] for p in pools], left=2)]


def _tables(data: Data) -> list[str]:
    zones = data["cluster"]["zones"]
    cost = data.get("cost") or {"hourly": {"pools": {}}, "monthly": {"pools": {}}}
    out = ["<h2>Node pools</h2>", _table(
        ["pool", "kind", "size", "image", "scale sets", "nodes", "GPUs", "vCPUs", "memory GiB",
         *(f"zone {z} nodes / GPUs" for z in zones), "USD/h", "USD/month"],
        [[escape(p["name"]), escape(p["kind"] + (" (InfiniBand)" if p["infiniband"] else "")), escape(p["vmSize"]),
          escape(p["image"]), str(len(p["scaleSets"])), _n(p["nodes"]), _n(p["gpus"]), _n(p["vcpus"]),
          _n(p["memoryGib"]), *(f'{_n(p["zones"][z]["nodes"])} / {_n(p["zones"][z]["gpus"])}' for z in zones),
          money(cost["hourly"]["pools"].get(p["name"])), money(cost["monthly"]["pools"].get(p["name"]))]
         for p in data["pools"]],
        left=4)]
    out += _racks(data)
    out += _node_images(data)
    out += cost_section(data)
    out += control_plane_section(data) + agent_load_section(data) + teams_section(data) + balloons_section(data)
    out += metrics_section(data)
    out += ["<h2>If a zone is lost</h2>", _table(
        ["zone", "nodes lost", "GPUs lost", "etcd left", "events etcd left", "API servers left"],
        [[escape(z["zone"]), _n(z["nodesLost"]), _n(z["gpusLost"]), _left(z["etcd"]), _left(z["eventsEtcd"]),
          f'{z["apiServers"]["left"]}/{z["apiServers"]["of"]}'] for z in data["zoneLoss"]])]
    out += rollout_section(data)
    out += ["<h2>IP plan</h2>", ip_picture(data), _table(
        ["block", "CIDR", "holds", "IPs needed", "usable", "room before full"],
        [[escape(b["name"] + (" (pinned)" if b["pinned"] else "")), escape(b["cidr"]), escape(b["purpose"]),
          _n(b["ipsNeeded"]), _n(b["usable"]), escape(headroom_text(b))] for b in data["ipPlan"]["blocks"]], left=3)]
    out.append(f'<p>{escape(entries_text(data["ipPlan"]))}; pod addresses on the nodes\' NICs: '
               f'{_n(data["ipPlan"]["podIpsOnNodes"])}</p>')
    prerequisite = prerequisite_text(data["ipPlan"])
    if prerequisite:
        cls = "ok" if data["ipPlan"]["prefixOnNic"]["onboarding"] else "warn"
        out.append(f'<p class="{cls}">{escape(prerequisite)}</p>')
    if data["ipPlan"]["unpinned"]:
        out.append(f'<p class="warn">{escape(unpinned_text(data["ipPlan"]))}</p>')
    out += egress_section(data)
    out += ["<h2>Azure limits and quota</h2>", _table(
        ["limit", "used", "default", "in force", "status"],
        [[escape(limit["description"]), "n/a" if limit["used"] is None else _n(limit["used"]),
          _n(limit["default"]) + (" (fixed)" if limit["fixed"] else ""), _n(limit["value"]), _limit_status(limit)]
         for limit in data["limits"]], left=1, left_last=True),
        _table(["family", "vCPUs needed", "declared", "short by"],
               [[escape(q["family"]), _n(q["vcpus"]), "not declared" if q["declared"] is None else _n(q["declared"]),
                 _n(q["shortBy"]) if q["shortBy"] else ""] for q in data["quota"]]),
        _table(["per-subscription count", "needed", "declared", "Azure's default or limit", "status"],
               [[escape(r["description"]), _n(r["needed"]),
                 _n(r["declared"]) if r["declared"] is not None
                 else "-" if r["fixed"] or r["azureDefault"] is None else "not declared",
                 "none" if r["azureDefault"] is None else _n(r["azureDefault"]) + (" (fixed)" if r["fixed"] else ""),
                 (f'<span class="warn">{escape(count_status_text(r))}</span>' if r["exceedsDefault"]
                  else escape(count_status_text(r)))] for r in data["resourceQuota"]], left=1, left_last=True)]
    if "versions" in data:
        k = data["versions"]["kubernetes"]
        out += [f'<h2>Versions: Kubernetes {escape(k["version"])}, end of life {escape(k["endOfLife"])}</h2>', _table(
            ["component", "version", "Kubernetes minors", "source"],
            [[escape(c["name"]), escape(c["version"]), escape(", ".join(c["minors"])), escape(c["source"])]
             for c in data["versions"]["components"]], left=4)]
    if data.get("firstUp"):
        out += ["<h2>First pulumi up: which run creates what, from where</h2>", _table(
            ["step", "runs from", "command", "resources", "what"],
            [[str(s["step"]), escape(s["runsFrom"]), f'<code>{escape(s["command"])}</code>', _n(s["resources"]),
              escape(", ".join(f"{n} {t}" for t, n in s["byType"].items()))] for s in data["firstUp"]["steps"]],
            left=5)]
    if data.get("firstBoot"):
        out += ["<h2>First boot: when each workload can start, and where</h2>", _table(
            ["step", "workload", "pools"],
            [[str(s["step"]), escape(s["workload"]), escape(", ".join(s["pools"]))] for s in data["firstBoot"]],
            left=3)]
    violations = folded_violations([Violation.from_dict(v) for v in data["policies"]["violations"]])
    out += ["<h2>Policies</h2>", _table(
        ["severity", "level", "rule", "resource", "message", "fix"],
        [[escape(v.policy_severity), escape(v.enforcement), escape(v.source), escape(folded_text(group)[1]),
          escape(folded_text(group)[0]), escape(v.fix)] for v, group in violations], left=6)
        if violations else '<p class="ok">No violations.</p>']
    return out + html_section(data)


def render_report(data: Data) -> str:
    c = data["cluster"]
    legend = "".join(f'<span style="background:{colour}"></span>{kind}' for kind, colour in POOL_COLOURS.items())
    return "".join([
        "<!doctype html><html lang=en><head><meta charset=utf-8>",
        f"<title>gpucluster {escape(data['stack'])}</title><style>{CSS}</style></head><body>",
        f"<h1>gpucluster plan: {escape(data['stack'])}</h1>",
        f'<div class="sub">cluster {escape(c["name"])} in {escape(c["location"])}, zones {escape(", ".join(c["zones"]))}, '
        f'Kubernetes {escape(c["kubernetesVersion"])}</div>',
        diff_section(data["diff"]) if data.get("diff") else "",  # what the change does comes first
        _cards(data),
        f'<h2>The cluster</h2><div class="legend">{legend}<span style="background:#0f766e"></span>API servers'
        f'<span style="background:#b45309"></span>etcd</div>',
        cluster_picture(data),
        *_tables(data),
        "</body></html>\n",
    ])
