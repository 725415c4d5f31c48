"""`gpucluster plan` runs with fewer cyclic collections (components/offline/gc_budget.py); the other commands, and the
caller of `main`, keep their thresholds."""

from __future__ import annotations

import argparse
import gc
from typing import Any

import pytest

from gpucluster import cli
from gpucluster.offline.gc_budget import PLAN_THRESHOLDS, fewer_collections


def _recording(seen: list[tuple[int, int, int]]) -> Any:
    def handler(args: argparse.Namespace, console: Any, errors: Any) -> int:
        seen.append(gc.get_threshold())
        return 0

    return handler


def test_plan_runs_with_the_plan_thresholds_and_restores_the_callers(monkeypatch: pytest.MonkeyPatch) -> None:
    before = gc.get_threshold()
    seen: list[tuple[int, int, int]] = []
    monkeypatch.setattr(cli, "cmd_plan", _recording(seen))
    monkeypatch.setattr(cli, "cmd_check", _recording(seen))
    assert cli.main(["plan", "dev", "--quiet"]) == 0
    assert cli.main(["check", "preview.json"]) == 0
    assert seen == [PLAN_THRESHOLDS, before] and gc.get_threshold() == before
    assert PLAN_THRESHOLDS[0] > before[0]


def test_the_thresholds_come_back_when_the_plan_raises() -> None:
    before = gc.get_threshold()
    with pytest.raises(RuntimeError), fewer_collections():
        assert gc.get_threshold() == PLAN_THRESHOLDS
        raise RuntimeError("a plan that fails")
    assert gc.get_threshold() == before
