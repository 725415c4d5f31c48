"""The first boot's result as the plan carries it: in what order the in-cluster layer's workloads start and on
which pools. The simulation that computes it reads the in-cluster objects (components/simulation/); the plan only
holds its outcome for the outputs (summary, report)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class BootStep:
    step: int
    workload: str
    pools: tuple[str, ...]


@dataclass(frozen=True)
class Stuck:
    workload: str
    pool: str | None
    reason: str


@dataclass(frozen=True)
class FirstBoot:
    steps: tuple[BootStep, ...]
    stuck: tuple[Stuck, ...]

    def placements(self) -> dict[str, tuple[str, ...]]:
        found: dict[str, list[str]] = {}
        for s in self.steps:
            found.setdefault(s.workload, []).extend(s.pools)
        return {k: tuple(sorted(set(v))) for k, v in found.items()}
