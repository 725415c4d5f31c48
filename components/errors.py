"""Errors a user can fix: each names the config path, what is wrong and how to fix it."""

from __future__ import annotations

from dataclasses import dataclass

from gpucluster.results import Severity


@dataclass(frozen=True)
class Problem:
    """One readable problem with a stack: `path` is a YAML path such as `cluster.pools[2].count`; the message says
    the fix (components/results.py: the vocabulary every check's result speaks)."""

    path: str
    message: str
    severity: Severity = Severity.ERROR
    source: str = ""
    fix: str = ""

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


class SpecError(Exception):
    """Bad input. Carries every problem found, so the user fixes them in one pass."""

    def __init__(self, problems: list[Problem]) -> None:
        if not problems:
            raise ValueError("SpecError needs at least one problem")
        self.problems = problems
        super().__init__("; ".join(str(p) for p in problems))

    @classmethod
    def at(cls, path: str, message: str) -> SpecError:
        return cls([Problem(path, message)])


def pool_path(index: int, key: str | None = None) -> str:
    """The YAML path of a pool (or one of its keys) in the stack file."""
    base = f"cluster.pools[{index}]"
    return f"{base}.{key}" if key else base
