"""The bootstrap tokens' schedule as the plan shows it: summary.json data and the terminal line.

The dates depend on the day the plan is made (components/planning/clock.py); tools/golden.py keeps only the
schedule's settings, so the golden figures do not change with the calendar.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console

from gpucluster.planning.bootstrap_tokens import TokenPeriod
from gpucluster.planning.cluster_plan import ClusterPlan

Data = dict[str, Any]
DATED_KEYS = ("current", "previous", "rotates")


def _rfc3339(period: TokenPeriod) -> Data:
    return {"period": period.period, "slot": period.slot, "issued": period.issued.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "expires": period.expiration}


def tokens_data(plan: ClusterPlan) -> Data:
    t = plan.tokens
    return {"rotationDays": t.rotation_days, "overlapDays": t.overlap_days, "generation": t.generation,
            "current": _rfc3339(t.current), "previous": _rfc3339(t.previous),
            "rotates": t.rotates.strftime("%Y-%m-%dT%H:%M:%SZ")}


def print_tokens(console: Console, tokens: Data) -> None:
    current, previous = tokens["current"], tokens["previous"]
    console.print(
        f"Bootstrap token: new machines join with the token of period {current['period']} (slot {current['slot']}), "
        f"which expires {current['expires']}; the next one is taken at the first `pulumi up` after "
        f"{tokens['rotates']} (every {tokens['rotationDays']} days); the previous token (period "
        f"{previous['period']}) stays valid until {previous['expires']}", markup=False, soft_wrap=True)
