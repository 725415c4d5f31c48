"""The plan's cost as data (summary.json `cost`) and as the terminal's short block (docs/cost.md)."""

from __future__ import annotations

from typing import Any

from rich.console import Console

from gpucluster.planning.cluster_plan import ClusterPlan
from gpucluster.planning.cost import CostLine, CostPlan

Data = dict[str, Any]
GROUPS = ("controlPlane", "deployRunner", "registry", "natGateway", "publicIps", "loadBalancers", "disks", "snapshotStorage",
          "metrics")


def usd(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def _line(line: CostLine, hours: int) -> Data:
    rate = line.rate
    basis = None if rate is None else (
        f"{line.quantity:,} x {rate.usd_per_hour:g} USD/h ({line.option}"
        f"{', ' + rate.region if rate.region else ', no region stated'}): {rate.source}, as of {rate.as_of.isoformat()}"
        f"{'; saved as components/catalog/data/' + rate.answer if rate.answer else ''}")
    return {"key": line.key, "group": line.group, "what": line.what, "quantity": line.quantity, "kind": line.kind,
            "sku": line.sku, "option": line.option, "usdPerUnitHour": usd(rate.usd_per_hour) if rate else None,
            "hourly": usd(line.hourly), "monthly": usd(None if line.hourly is None else line.hourly * hours),
            "basis": basis, "priceFile": bool(rate and rate.from_price_file), "asOf": rate.as_of.isoformat() if rate else None}


def _figures(cost: CostPlan, pools: list[str], factor: int) -> Data:
    def scaled(value: float | None) -> float | None:
        return usd(None if value is None else value * factor)

    out: Data = {"total": scaled(cost.hourly_total), "pools": {p: scaled(cost.pool_hourly(p)) for p in pools}}
    out.update({g: scaled(cost.group_hourly(g)) for g in GROUPS})
    return out


def cost_data(plan: ClusterPlan) -> Data:
    cost = plan.cost
    hours, pools = cost.hours_per_month, [p.name for p in plan.pools]
    return {
        "currency": "USD", "region": cost.region, "hoursPerMonth": hours, "priceFile": cost.price_file,
        "hourly": _figures(cost, pools, 1), "monthly": _figures(cost, pools, hours),
        "complete": not cost.unpriced,
        "machines": {"priced": sum(li.quantity for li in cost.lines if li.kind == "vm" and li.rate is not None),
                     "total": sum(li.quantity for li in cost.lines if li.kind == "vm")},
        "lines": [_line(line, hours) for line in cost.lines],
        "infinibandDomains": [{"pool": d.pool, "scaleSet": d.scale_set, "zone": d.zone, "interconnectGroup": d.rack,
                               "nodes": d.nodes, "hourly": usd(d.hourly),
                               "monthly": usd(None if d.hourly is None else d.hourly * hours)} for d in cost.domains],
        "teams": [{"team": t.team, "nominalHourly": usd(t.nominal_hourly), "borrowingHourly": usd(t.borrowing_hourly),
                   "lendingHourly": usd(t.lending_hourly),
                   "flavors": [{"flavor": f.flavor, "pool": f.pool, "nominalShare": round(f.nominal, 6),
                                "borrowingShare": None if f.borrowing is None else round(f.borrowing, 6),
                                "lendingShare": None if f.lending is None else round(f.lending, 6)}
                               for f in t.flavors]} for t in cost.teams],
        "balloons": [{"pool": w.pool, "nodes": w.nodes, "hourly": usd(w.hourly),
                      "monthly": usd(None if w.hourly is None else w.hourly * hours)} for w in cost.warm],
        "unpriced": [{"what": u.what, "reason": u.reason} for u in cost.unpriced],
        "warnings": list(cost.warnings),
        "notCounted": "traffic (internet egress, NAT gateway and load balancer data processed), support plans, the "
                      "Azure Monitor workspace, node image builds and gallery replicas (docs/cost.md)",
    }


def money(value: float | None) -> str:
    return "unpriced" if value is None else f"{value:,.2f}"


def print_cost(console: Console, data: Data) -> None:
    cost = data.get("cost")
    if not cost:
        return
    h, m = cost["hourly"], cost["monthly"]
    machines = cost["machines"]
    # A partial sum is never the headline: how much of the cluster is priced comes first (Infracost likewise puts
    # "N resources not priced" beside its total).
    head = (f"{money(h['total'])} USD/h, {money(m['total'])} USD/month at {cost['hoursPerMonth']} h" if cost["complete"]
            else f"{machines['priced']:,} of {machines['total']:,} machines priced, {len(cost['unpriced'])} rows "
                 f"unpriced: the priced rows alone come to {money(h['total'])} USD/h, {money(m['total'])} USD/month "
                 f"at {cost['hoursPerMonth']} h")
    console.print(f"[bold]Cost[/bold] in {cost['region']}: {head}" + (f"; price file {cost['priceFile']}"
                                                                       if cost['priceFile'] else ""), soft_wrap=True)
    pools = ", ".join(f"{name} {money(value)}" for name, value in h["pools"].items())
    console.print(f"  pools USD/h: {pools}", soft_wrap=True, markup=False)
    rest = ", ".join(f"{g} {money(h[g])}" for g in GROUPS)
    console.print(f"  other USD/h: {rest}", soft_wrap=True, markup=False)
    if cost["unpriced"]:
        console.print(f"  unpriced (why: summary.json cost.unpriced, docs/cost.md): "
                      f"{'; '.join(u['what'] for u in cost['unpriced'])}", soft_wrap=True, markup=False)
    for warning in cost["warnings"]:
        console.print(f"[yellow]  {warning}[/yellow]", soft_wrap=True)
