"""The shipped stacks' figures live in one file, tests/golden/stacks.json; `python -m tools.golden` regenerates
it. When this test fails after a deliberate change to a stack (or to what a plan computes), regenerate the
file and review its diff: it is the change's effect on nodes, GPUs, the IP layout, quota and limits."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpucluster.offline.engine import ProgramRun
from tools import golden
from tools.golden import GOLDEN, changed_keys, figures, stack_names


def test_golden_figures_are_current(prod_run: ProgramRun) -> None:
    stored = json.loads(GOLDEN.read_text(encoding="utf-8"))
    current = {stack: figures(stack, prod_run if stack == "prod" else None) for stack in stack_names()}
    changed = changed_keys(stored, current)
    assert not changed, ("the shipped stacks' figures changed; if that is intended, run `python -m tools.golden` "
                         "and commit tests/golden/stacks.json:\n" + "\n".join(changed))


def test_a_stack_of_ones_own_changes_no_shipped_stack_test(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Adding stacks/Pulumi.mine.yaml turned `make test` red: the golden file and the README's commands were
    expected for every stack file. They cover the shipped stacks; a missing shipped stack file says what to do."""
    (tmp_path / "stacks").mkdir()
    for stack in (*golden.SHIPPED_STACKS, "mine"):
        (tmp_path / "stacks" / f"Pulumi.{stack}.yaml").write_text("config: {}\n")
    monkeypatch.setattr(golden, "ROOT", tmp_path)
    assert golden.stack_names() == sorted(golden.SHIPPED_STACKS)
    assert set(json.loads(GOLDEN.read_text(encoding="utf-8"))) == set(golden.SHIPPED_STACKS)
    (tmp_path / "stacks" / "Pulumi.gb300.yaml").unlink()
    with pytest.raises(SystemExit, match=r"shipped stacks without their stack file: gb300 \(tools/golden.py"):
        golden.stack_names()
