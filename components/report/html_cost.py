"""report.html's cost: the section with every priced line, the InfiniBand domains and racks, the teams' quota
shares, the balloons' warm capacity and what is unpriced (docs/cost.md). Reads only summary data."""

from __future__ import annotations

from html import escape
from typing import Any

from gpucluster.report.cost_report import money
from gpucluster.report.html_table import n, table

Data = dict[str, Any]


def _rate(value: float | None) -> str:
    return "unpriced" if value is None else f"{value:g}"


def _share(value: float | None) -> str:
    return "no limit" if value is None else f"{value:.1%}"


def cost_section(data: Data) -> list[str]:
    cost = data.get("cost")
    if not cost:
        return []
    h, m = cost["hourly"], cost["monthly"]
    machines = cost["machines"]
    head = (f"{money(h['total'])} USD/h, {money(m['total'])} USD/month" if cost["complete"]
            else f"{machines['priced']:,} of {machines['total']:,} machines priced, {len(cost['unpriced'])} rows "
                 f"unpriced (the priced rows alone: {money(h['total'])} USD/h, {money(m['total'])} USD/month)")
    out = [f"<h2>Cost: {escape(head)}</h2>",
           f"<p>At {cost['hoursPerMonth']} hours a month in {escape(cost['region'])}"
           + (f", with the price file {escape(cost['priceFile'])}" if cost["priceFile"] else "")
           + f". Not counted: {escape(cost['notCounted'])}.</p>"]
    out += [f'<p class="warn">{escape(w)}</p>' for w in cost["warnings"]]
    out.append(table(["what", "option", "USD/h each", "USD/h", "USD/month", "basis"],
                     [[escape(x["what"]), escape(x["option"] + (" (price file)" if x["priceFile"] else "")),
                       _rate(x["usdPerUnitHour"]), money(x["hourly"]), money(x["monthly"]), escape(x["basis"] or "-")]
                      for x in cost["lines"]], left=2, left_last=True))
    if cost["unpriced"]:
        out.append("<p>Unpriced:</p><ul>" + "".join(f"<li>{escape(u['what'])}: {escape(u['reason'])}</li>"
                                                     for u in cost["unpriced"]) + "</ul>")
    if cost["infinibandDomains"]:
        out += ["<h2>Cost per InfiniBand domain or NVLink rack</h2>", table(
            ["pool", "scale set", "zone", "interconnect group", "nodes", "USD/h", "USD/month"],
            [[escape(d["pool"]), escape(d["scaleSet"]), escape(d["zone"]), escape(d["interconnectGroup"] or "-"),
              n(d["nodes"]), money(d["hourly"]), money(d["monthly"])] for d in cost["infinibandDomains"]], left=4)]
    if cost["teams"]:
        out += ["<h2>Cost of each team's quota (quota is not spend)</h2>", table(
            ["team", "flavors: nominal / borrowing / lending share", "nominal USD/h", "may borrow USD/h",
             "may lend USD/h"],
            [[escape(t["team"]), escape("; ".join(f"{f['flavor']}: {_share(f['nominalShare'])} / "
                                                   f"{_share(f['borrowingShare'])} / {_share(f['lendingShare'])}"
                                                   for f in t["flavors"])),
              money(t["nominalHourly"]), money(t["borrowingHourly"]), money(t["lendingHourly"])]
             for t in cost["teams"]], left=2)]
    if cost["balloons"]:
        out += ["<h2>Cost of warm capacity (balloons, within the pools' cost)</h2>", table(
            ["pool", "warm nodes", "USD/h", "USD/month"],
            [[escape(b["pool"]), n(b["nodes"]), money(b["hourly"]), money(b["monthly"])] for b in cost["balloons"]])]
    return out
