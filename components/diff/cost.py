"""What a change costs: each side's summary.json `cost` (docs/cost.md), compared per pool and in total.

A side's figures are read defensively (a summary is a file a reviewer may be handed): a figure that is not a finite
number reads as unpriced.
"""

from __future__ import annotations

import math
from typing import Any

from gpucluster.catalog.prices import HOURS_PER_MONTH
from gpucluster.diff.sides import Side


def _usd(value: Any) -> float | None:
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    return float(value) if ok else None


def _cost(side: Side) -> dict[str, Any] | None:
    cost = side.summary.get("cost") if side.summary else None
    return cost if isinstance(cost, dict) and isinstance(cost.get("hourly"), dict) else None


def _pools(cost: dict[str, Any]) -> dict[str, float | None] | None:
    """Each pool's hourly cost; None when the side does not say which pools it has."""
    pools = cost["hourly"].get("pools")
    return {str(k): _usd(v) for k, v in pools.items()} if isinstance(pools, dict) else None


def _change(before: float | None, after: float | None, hours: int) -> dict[str, Any]:
    delta = None if before is None or after is None else round(after - before, 4)
    return {"baseHourly": before, "headHourly": after, "deltaHourly": delta,
            "deltaMonthly": None if delta is None else round(delta * hours, 4)}


def cost_delta(base: Side, head: Side) -> dict[str, Any] | None:
    """Total and per-pool USD per hour and per month, base -> head; None when a side carries no cost."""
    before, after = _cost(base), _cost(head)
    if before is None or after is None:
        return None
    stated = after.get("hoursPerMonth")
    hours = stated if isinstance(stated, int) and not isinstance(stated, bool) and 0 < stated <= 744 else HOURS_PER_MONTH
    pools_before, pools_after = _pools(before), _pools(after)

    def pool(side: dict[str, float | None] | None, name: str) -> float | None:
        # A pool on one side only costs nothing on the other; a side that lists no pools says nothing.
        return None if side is None else side.get(name, 0.0)

    names = sorted(set(pools_before or {}) | set(pools_after or {}))
    pools = {name: _change(pool(pools_before, name), pool(pools_after, name), hours) for name in names}
    total = _change(_usd(before["hourly"].get("total")), _usd(after["hourly"].get("total")), hours)
    # A pool priced on one side only (its pricing option has no rate, its size no row) is not a saving or a cost:
    # the change is then the pools priced on both sides, and the pools left out are named.
    unpriced = sorted(n for n, c in pools.items() if (c["baseHourly"] is None) != (c["headHourly"] is None))
    if unpriced and total["deltaHourly"] is not None:
        delta = round(sum(c["deltaHourly"] for c in pools.values() if c["deltaHourly"] is not None), 4)
        total = {**total, "deltaHourly": delta, "deltaMonthly": round(delta * hours, 4)}
    return {"total": {**total, "unpricedPools": unpriced}, "pools": pools, "hoursPerMonth": hours,
            "baseComplete": before.get("complete") is True, "headComplete": after.get("complete") is True}


def _money(value: float | None, signed: bool = False) -> str:
    if value is None:
        return "unpriced"
    return (("+" if signed and value > 0 else "") + f"{value:,.2f}")


def cost_lines(cost: dict[str, Any] | None) -> list[str]:
    """The cost of the change, total first, then each pool whose cost moved or is unpriced on a side."""
    if cost is None:
        return ["cost: not known (a side has no summary.json with cost: plan both sides with gpucluster plan)"]
    total = cost["total"]
    partial = "" if cost["baseComplete"] and cost["headComplete"] else " (priced rows only: a side has unpriced rows)"
    unpriced = total.get("unpricedPools") or []
    if unpriced:
        partial = (f" on the pools priced on both sides; not comparable, priced on one side only: "
                   f"{', '.join(unpriced)}")
    lines = [f"cost: {_money(total['deltaHourly'], True)} USD/h, {_money(total['deltaMonthly'], True)} USD/month "
             f"({_money(total['baseHourly'])} -> {_money(total['headHourly'])} USD/h){partial}"]
    for name, change in cost["pools"].items():
        if change["deltaHourly"] != 0.0:
            lines.append(f"cost of pool {name}: {_money(change['deltaHourly'], True)} USD/h, "
                         f"{_money(change['deltaMonthly'], True)} USD/month ({_money(change['baseHourly'])} -> "
                         f"{_money(change['headHourly'])} USD/h)")
    return lines
