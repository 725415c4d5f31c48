"""`make bench` runs every row to the end: a scaled stack the planner refuses is reported in its row with the
planner's reason (prod x4's events etcd outgrows etcd's 8 GiB quota), never a traceback that ends the table."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

from gpucluster.catalog import limits
from tests.support.stacks import ROOT

sys.path.insert(0, str(ROOT / "bench"))
plan_bench = importlib.import_module("plan_bench")  # bench/ is scripts, not a package


def test_a_refused_stack_is_reported_in_its_row_and_the_table_goes_on(tmp_path: Path) -> None:
    label, path, mode = next(row for row in plan_bench.stacks(tmp_path) if row[0] == "prod x4")
    ceilings = dict(limits.OVERRIDE_CEILINGS)
    row, note = plan_bench.measure(label, path, mode, tmp_path)
    assert row.startswith("prod x4") and "refused by the planner" in row
    # etcd's sizing refuses it (the main or the events members past etcd's 8 GiB), named with its key
    assert note is not None and note.startswith("prod x4: cluster.controlPlane.") and "etcd" in note
    assert "would hold" in note
    assert ceilings == limits.OVERRIDE_CEILINGS  # the lifted NAT ceiling is back for whatever runs next


def test_a_plan_that_exits_2_is_reported_in_its_row(tmp_path: Path) -> None:
    (tmp_path / "dev").write_text("a file where the plan's output folder would go")  # refused before planning
    row, note = plan_bench.measure("dev", ROOT / "stacks" / "Pulumi.dev.yaml", "-", tmp_path)
    assert row.startswith("dev") and "plan exit 2" in row and note == "dev: gpucluster plan exit 2"


def test_a_measurement_whose_process_dies_names_its_last_line() -> None:
    try:
        plan_bench._child("import sys; sys.exit('out of memory, say')")
    except plan_bench.ChildError as failed:
        assert str(failed) == "out of memory, say"
    else:
        raise AssertionError("a dead child is an error")
