"""The shipped stacks' figures live in one file, tests/golden/stacks.json; `python -m tools.golden` regenerates
it. When this test fails after a deliberate change to a stack (or to what a plan computes), regenerate the
file and review its diff: it is the change's effect on nodes, GPUs, the IP layout, quota and limits."""

from __future__ import annotations

import json

from components.offline.engine import ProgramRun
from tools.golden import GOLDEN, changed_keys, figures, stack_names


def test_golden_figures_are_current(prod_run: ProgramRun) -> None:
    stored = json.loads(GOLDEN.read_text(encoding="utf-8"))
    current = {stack: figures(stack, prod_run if stack == "prod" else None) for stack in stack_names()}
    changed = changed_keys(stored, current)
    assert not changed, ("the shipped stacks' figures changed; if that is intended, run `python -m tools.golden` "
                         "and commit tests/golden/stacks.json:\n" + "\n".join(changed))
