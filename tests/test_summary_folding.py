"""Warnings that repeat per resource read as one line per rule, with the count and the resources folded: in the
terminal summary and in report.html (summary.json keeps every row)."""

from __future__ import annotations

import io
import re
from collections import Counter

import pytest
from rich.console import Console

from gpucluster.offline.engine import ProgramRun
from gpucluster.offline.policy_runner import Violation, enforcement_severity
from gpucluster.offline.preview import preview_document
from gpucluster.planning.cluster_plan import plan_cluster
from gpucluster.preflight import run_preflight
from gpucluster.preflight.fold import merged_message, names_text
from gpucluster.preflight.model import Finding
from gpucluster.preflight.report import KEY, html_section, print_warnings, warning_rows
from gpucluster.report.html_report import render_report
from gpucluster.report.report_data import report_data
from gpucluster.report.summary import print_violations


@pytest.fixture(scope="module")
def prod_data(prod_run: ProgramRun, prod_spec) -> dict:
    plan = plan_cluster(prod_spec)
    checked = run_preflight(preview_document(prod_run)["steps"], plan)
    data = report_data(plan, "prod", Counter(r.type for r in prod_run.registrations if r.custom), [])
    data[KEY] = warning_rows(checked.warnings)
    return data


def test_prod_preflight_warnings_are_one_line_per_rule(prod_data: dict) -> None:
    """Before: prod's summary listed one warning 43 times (once per scale set), 172 of its 367 lines. Prod's own
    warnings no longer repeat that much, so one warning on each of its 43 node scale sets is added to them."""
    sets = sorted({name for name in (row["resource"] for row in prod_data[KEY])} | {f"h100-z{z}-{i:02d}" for z in (1, 2)
                                                                                    for i in range(20)})
    repeated = [Finding.warning("ephemeral-os-disk-placement", name, "virtualMachineProfile.storageProfile.osDisk",
                        "placement CacheDisk cannot be checked") for name in sets]
    prod_data = {**prod_data, KEY: [*prod_data[KEY], *warning_rows(repeated)]}
    counts = Counter(row["rule"] for row in prod_data[KEY])
    assert max(counts.values()) > 10  # the case this folds: one rule on many scale sets
    out = io.StringIO()
    print_warnings(Console(file=out, width=2000), prod_data)
    text = out.getvalue()
    for rule, count in counts.items():
        [line] = [line for line in text.splitlines() if rule in line]
        assert re.search(rf"\b{count}\b", line), line
        if count > 3:
            assert f"+{count - 3} more" in line
    html = "".join(html_section(prod_data))
    for rule, count in counts.items():
        assert html.count(f"<td class=l>{rule}</td><td>{count}</td>") == 1 and html.count(rule) == 1
    assert f"{len(prod_data[KEY])} warnings from {len(counts)} rules" in html


def test_messages_that_differ_in_a_word_merge_into_one() -> None:
    assert merged_message(["1 IP configurations ask", "2 IP configurations ask", "2 IP configurations ask"]) == \
        "{1|2} IP configurations ask"
    assert merged_message(["size A: run --size A", "size B: run --size B"]) == \
        "size {A|B}: run --size {A|B}"
    assert merged_message(["one", "two words"]) == "one (and 1 other wordings; summary.json lists each)"
    assert names_text(["a", "b", "c", "d", "e"]) == "a, b, c +2 more" and names_text(["a"]) == "a"


def _violation(policy: str, name: str, message: str, enforcement: str) -> Violation:
    return Violation(policy, "d", "high", enforcement_severity(enforcement), f"urn:pulumi:prod::gpucluster::t::{name}",
                     message, "do x")


def test_advisory_violations_fold_per_policy_and_mandatory_ones_stay_apart(prod_data: dict) -> None:
    """An advisory note the runner raises per resource (\"can't run policy ... during preview\") is one line;
    each mandatory violation still names its resource, since each must be fixed."""
    advisory = [_violation("spare-capacity", f"h100-z1-{i:02d}", f"can't run: {i} unknown", "advisory") for i in range(6)]
    mandatory = [_violation("spread", name, "not spread", "mandatory") for name in ("a", "b")]
    violations = [*advisory, *mandatory]
    out = io.StringIO()
    print_violations(Console(file=out, width=2000), violations)
    lines = out.getvalue().splitlines()
    assert sum("spare-capacity" in line for line in lines) == 1
    assert "      resource: 6 resources: h100-z1-00, h100-z1-01, h100-z1-02 +3 more" in lines
    assert any("spare-capacity: can't run: {0|1|2|3|+2 more} unknown" in line for line in lines)
    assert sum("] spread:" in line for line in lines) == 2
    html = render_report(prod_data | {"policies": {"mandatory": 2, "advisory": 6,
                                                   "violations": [v.as_dict() for v in violations]}})
    assert html.count(">spare-capacity<") == 1 and html.count(">spread<") == 2
    assert "6 resources: h100-z1-00, h100-z1-01, h100-z1-02 +3 more" in html
