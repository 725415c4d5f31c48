"""A one-line vmSize change on prod (H100 -> H200) must not replace the whole GPU fleet unannounced: the node scale
sets' provider replaces a scale set whose sku changes (components/azure/scale_set/routes.py ROUTE_REPLACES), so every
InfiniBand domain of the pool would go in one `pulumi up`. The diff (and `gpucluster check` over a real preview)
says so as an error per domain unless the stack acknowledges them (policies/rules/replacements.py)."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from gpucluster.diff.compare import PlanDiff, diff_sides
from gpucluster.diff.sides import side_from_document
from gpucluster.offline.engine import ProgramRun
from gpucluster.offline.preview import preview_document
from gpucluster.offline.replaced_domains import replaced_domain_violations
from gpucluster.planning.cluster_plan import plan_cluster
from gpucluster.policies.rules.replacements import Replaced, judge
from gpucluster.report.report_data import report_data
from tests.support.plan_sides import plan_document, stack_raw
from tests.support.stacks import ROOT, spec_of

H100, H200 = "Standard_ND96isr_H100_v5", "Standard_ND96isr_H200_v5"


def _h200_raw() -> dict[str, Any]:
    raw = stack_raw("prod")
    [pool] = [p for p in raw["pools"] if p["vmSize"] == H100]
    pool["vmSize"] = H200
    return raw


@functools.cache
def _head() -> tuple[str, str]:
    document, data = plan_document(_h200_raw(), "prod")
    return json.dumps(document), json.dumps(data)


def _diff(prod_run: ProgramRun, acknowledge: list[str] | None = None) -> PlanDiff:
    raw = stack_raw("prod")
    base = side_from_document("prod", preview_document(prod_run), report_data(
        plan_cluster(spec_of(raw)), "prod", Counter(r.type for r in prod_run.registrations if r.custom), [], {}))
    document, data = (json.loads(t) for t in _head())
    if acknowledge is not None:
        data["acknowledgeDeletions"] = {"teams": [], "infinibandDomains": acknowledge}
    return diff_sides(base, side_from_document("prod-h200", document, data))


def test_prod_h100_to_h200_is_an_error_per_domain_without_the_acknowledgement(prod_run: ProgramRun) -> None:
    result = _diff(prod_run)
    replaced = [c for c in result.changes if c.action == "replace" and c.name.startswith("h100-")]
    assert len(replaced) == 32, "every InfiniBand domain of the pool is replaced"
    errors = [f for f in result.errors if f.source == "replaced-infiniband-domain"]
    assert sorted(f.path for f in errors) == sorted(c.name for c in replaced)
    assert f"{H100} -> {H200}" in errors[0].message and "unacknowledged" in errors[0].message
    assert "acknowledgeDeletions.infinibandDomains" in (errors[0].fix or "")


def test_the_acknowledgement_turns_them_into_warnings(prod_run: ProgramRun) -> None:
    result = _diff(prod_run, ["h100-*"])
    assert not [f for f in result.errors if f.source == "replaced-infiniband-domain"]
    assert len([f for f in result.flags if f.source == "replaced-infiniband-domain"]) == 32


def _replaced(name: str, pool: str = "h100", infiniband: str = "true") -> Replaced:
    return Replaced(name, {"gpucluster-pool": pool, "gpucluster-infiniband": infiniband}, H100, H200, 98,
                    "replaced by sku.name")


def test_one_domain_at_a_time_needs_no_acknowledgement() -> None:
    [only] = judge([_replaced("h100-z1-00"), _replaced("cpu-z1-00", "cpu", "false")], [])
    assert (only.severity, only.path) == ("warning", "h100-z1-00")


def test_two_domains_of_one_pool_need_it_and_an_unknown_acknowledgement_only_warns() -> None:
    two = [_replaced("h100-z1-00"), _replaced("h100-z2-00")]
    assert [f.severity for f in judge(two, [])] == ["error", "error"]
    assert [f.severity for f in judge(two, ["h100-z1-00"])] == ["warning", "warning"]
    assert [f.severity for f in judge(two, None)] == ["warning", "warning"]
    spread = [_replaced("h100-z1-00"), _replaced("a100-z1-00", "a100")]
    assert [f.severity for f in judge(spread, [])] == ["warning", "warning"]


def _real_preview(prod_run: ProgramRun) -> dict[str, Any]:
    """The H200 head as `pulumi preview --json --show-sames` shows it over a prod stack at H100: each h100 scale set
    a `replace` step with both states and `replaceReasons` (pulumi/pulumi pkg/display/json.go PreviewStep)."""
    before = {s["urn"]: s["newState"] for s in preview_document(prod_run)["steps"]}
    document = json.loads(_head()[0])
    steps = []
    for step in document["steps"]:
        new = step["newState"]
        if new["urn"].rsplit("::", 1)[-1].startswith("h100-") and new["inputs"].get("armType"):
            steps.append({"op": "replace", "urn": step["urn"], "oldState": before[step["urn"]], "newState": new,
                          "replaceReasons": ["sku"]})
        else:
            steps.append({"op": "same", "urn": step["urn"], "oldState": new, "newState": new})
    return {"steps": steps}


def test_check_over_a_real_preview_fails_the_unacknowledged_replacement(prod_run: ProgramRun, tmp_path: Path) -> None:
    preview = _real_preview(prod_run)
    violations = replaced_domain_violations(preview, [])
    assert len(violations) == 32 and all(v.mandatory for v in violations)
    assert all(v.path and "::h100-" in v.path for v in violations)
    assert not any(v.mandatory for v in replaced_domain_violations(preview, ["h100-*"]))
    assert not any(v.mandatory for v in replaced_domain_violations(preview, None))  # no stack named: unknown
    path = tmp_path / "preview.json"
    path.write_text(json.dumps(preview))
    result = subprocess.run([sys.executable, "-m", "gpucluster.cli", "check", str(path), "--stack", "prod"], cwd=ROOT,
                            env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "infiniband-domains-replaced-one-at-a-time" in result.stdout


def test_where_the_provider_resizes_in_place_the_diff_says_running_vms_keep_their_size(
        prod_run: ProgramRun, monkeypatch: pytest.MonkeyPatch) -> None:
    """If the node scale sets' provider sends sku.name in its update (the 2026-07-02 update model carries `sku`;
    the provider's replace table decides, components/azure/scale_set/routes.py), nothing is replaced: no error, and a
    warning per scale set that running VMs keep the old size until updated."""
    from gpucluster.azure.scale_set import routes as arm_routes

    monkeypatch.setattr(arm_routes, "ROUTE_REPLACES", tuple(r for r in arm_routes.ROUTE_REPLACES if r[0] != "sku"))
    result = _diff(prod_run)
    assert not [c for c in result.changes if c.action == "replace" and c.name.startswith("h100-")]
    assert not [f for f in result.errors if f.source == "replaced-infiniband-domain"]
    warnings = [f for f in result.flags if f.source == "resized-in-place"]
    assert len(warnings) == 32 and all(f.severity == "warning" for f in warnings)
