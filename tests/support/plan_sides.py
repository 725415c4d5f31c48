"""Plan a stack in-process and read it as one side of a diff (what `gpucluster plan --out` would write)."""

from __future__ import annotations

import copy
from collections import Counter
from typing import Any

import yaml

from gpucluster.diff.sides import Side, side_from_document
from gpucluster.offline.engine import run_program
from gpucluster.offline.preview import preview_document
from gpucluster.planning.cluster_plan import plan_cluster
from gpucluster.report.report_data import report_data
from tests.support.stacks import ROOT, STACKS, spec_of


def stack_raw(name: str) -> dict[str, Any]:
    document = yaml.safe_load((STACKS / f"Pulumi.{name}.yaml").read_text(encoding="utf-8"))
    return copy.deepcopy(document["config"]["gpucluster:cluster"])


def plan_document(raw: dict[str, Any], stack: str = "dev") -> tuple[dict[str, Any], dict[str, Any]]:
    """(preview document, summary data) of the stack whose `gpucluster:cluster` is `raw`."""
    plan = plan_cluster(spec_of(raw))
    run = run_program(ROOT / "__main__.py", "gpucluster", stack,
                      {"azure-native:location": raw["location"], "gpucluster:cluster": raw})
    data = report_data(plan, stack, Counter(r.type for r in run.registrations if r.custom), [], run.outputs)
    return preview_document(run), data


def plan_side(raw: dict[str, Any], label: str, acknowledge: dict[str, Any] | None = None) -> Side:
    document, data = plan_document(raw)
    if acknowledge is not None:
        data["acknowledgeDeletions"] = acknowledge
    return side_from_document(label, document, data)
