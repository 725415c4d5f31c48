"""The date the plan is made on: UTC today, or `GPUCLUSTER_TODAY` (YYYY-MM-DD) to plan as of another day.

Only the bootstrap tokens' schedule reads it (components/planning/bootstrap_tokens.py): the plan of a stack
is the same for every day of one rotation period.
"""

from __future__ import annotations

import os
from datetime import UTC, date, datetime

from gpucluster.errors import Problem, SpecError

ENV = "GPUCLUSTER_TODAY"


def today() -> date:
    text = os.environ.get(ENV, "").strip()
    if not text:
        return datetime.now(UTC).date()
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise SpecError([Problem(ENV, f"must be a date such as 2026-05-01 (got {text[:40]!r}); unset it to plan "
                                      "as of today")]) from None
