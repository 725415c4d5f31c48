"""What every check reports, in one vocabulary: where (`path`), what (`message`), how bad (`severity`), what says so
(`source`) and what to do (`fix`).

Six places judge a stack (docs/architecture.md, "Where a check goes"), each with its result type: `Problem`
(errors.py: input shape, planner arithmetic, first boot), the preflight's `Finding` (preflight/model.py), the
pack's `Violation` (offline/policy_runner.py), the diff's `Flag` (diff/compare.py), the replacement rule's
`ReplacementFinding` (policies/rules/replacements.py) and verify's `Result` (verify/results.py). Each is a frozen
dataclass of its own, because each is built, sorted and written in its own shape, and each has these five names with
the same meaning; tests/test_result_vocabulary.py fails on a result type that does not, or on a seventh.

Standard library only: the bottom of components/. The policy pack runs as a folder of its own, without components/,
so policies/rules/replacements.py spells the severities it uses as these values (the same test checks them).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Protocol


class Severity(StrEnum):
    """How bad a result is; the values are what the outputs print (summary.json, the diff's JSON, verify's JSON)."""

    ERROR = "error"
    """Refused: the plan exits 2, the pack's mandatory level, a change the diff stops, a failed live check."""
    WARNING = "warning"
    """To look at twice: it does not stop the plan or the change (the pack's advisory level)."""
    NOTE = "note"
    """Said for the record, nothing to act on: a live check that passed or could not run yet."""


class CheckResult(Protocol):
    """One result of any check. Read-only: every result type is a frozen dataclass."""

    @property
    def path(self) -> str:
        """Where: a config path (`cluster.pools[2].count`), a resource (logical name or URN), or a live subject (a
        size in a zone, a node); "" for what concerns the whole stack."""
        ...

    @property
    def message(self) -> str:
        """What is wrong, or on a note what was found."""
        ...

    @property
    def severity(self) -> Severity: ...

    @property
    def source(self) -> str:
        """What says so: the rule, policy or check's id, or where its rule comes from; "" where the message says it."""
        ...

    @property
    def fix(self) -> str:
        """What to do about it; "" where the message already says it or there is nothing to do."""
        ...
