"""Every check's result speaks one vocabulary (components/results.py): path, message, severity, source, fix.

The scan reads every class of components/, policies/ and tools/ and calls a result type any class that declares a
field a result carries (`fix`, `remediation`, `severity`, `enforcement`): each must be one of the six known types,
and each of those must carry the vocabulary's five names with `severity` a `Severity`. A seventh result type, or
one of the six going back to its own words, fails here. The replacement rule lives in the policy pack's folder,
which runs without components/ (policies/__main__.py): it spells the severities as `Severity`'s values.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import subprocess
import sys
import typing
from pathlib import Path

from gpucluster.diff.compare import Flag
from gpucluster.errors import Problem
from gpucluster.offline.policy_runner import Violation
from gpucluster.policies.rules import replacements
from gpucluster.policies.rules.replacements import Replaced, ReplacementFinding, judge
from gpucluster.preflight.model import Finding
from gpucluster.results import CheckResult, Severity
from gpucluster.verify.results import Result
from gpucluster.vocabulary import INFINIBAND_TAG, POOL_TAG

ROOT = Path(__file__).resolve().parent.parent
SCANNED = ("components", "policies", "tools")
VOCABULARY = ("path", "message", "severity", "source", "fix")
RESULT_FIELDS = {"fix", "remediation", "severity", "enforcement"}

RESULT_TYPES: tuple[type[CheckResult], ...] = (Problem, Finding, Violation, Flag, Result)
"""The result types under components/; pyright holds each to the `CheckResult` protocol."""

NOT_RESULTS = {
    "components/planning/metrics_rules.py:AlertRule": "a Prometheus alerting rule the cluster renders; its `severity` "
                                                      "is the label the alert carries",
}


def _where(cls: type) -> str:
    return f"{Path(inspect.getfile(cls)).resolve().relative_to(ROOT)}:{cls.__name__}"


def _declared_results(root: Path = ROOT) -> set[str]:
    found = set()
    for top in SCANNED:
        for path in sorted((root / top).rglob("*.py")):
            tree = ast.parse(path.read_text(), str(path))
            for node in ast.walk(tree):
                if not isinstance(node, ast.ClassDef):
                    continue
                names = {s.target.id for s in node.body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)}
                if names & RESULT_FIELDS:
                    found.add(f"{path.relative_to(root)}:{node.name}")
    return found


def test_every_result_type_is_one_of_the_six() -> None:
    known = {_where(cls) for cls in (*RESULT_TYPES, ReplacementFinding)}
    assert _declared_results() - set(NOT_RESULTS) == known


def test_the_scan_finds_a_seventh(tmp_path: Path) -> None:
    (tmp_path / "tools").mkdir()
    (tmp_path / "tools" / "audit.py").write_text("class Verdict:\n    where: str\n    severity: str\n\n\n"
                                                 "class Row:\n    name: str\n")
    assert _declared_results(tmp_path) == {"tools/audit.py:Verdict"}


def _members(cls: type) -> dict[str, object]:
    """Each vocabulary name's declared type: a field's annotation or a property's return annotation."""
    hints = typing.get_type_hints(cls)
    members: dict[str, object] = {}
    for name in VOCABULARY:
        attribute = inspect.getattr_static(cls, name, None)
        if isinstance(attribute, property) and attribute.fget is not None:
            members[name] = typing.get_type_hints(attribute.fget)["return"]
        elif name in {f.name for f in dataclasses.fields(cls)}:
            members[name] = hints[name]
    return members


def test_each_result_type_carries_the_vocabulary() -> None:
    for cls in (*RESULT_TYPES, ReplacementFinding):
        assert dataclasses.is_dataclass(cls) and cls.__dataclass_params__.frozen, cls  # type: ignore[attr-defined]
        members = _members(cls)
        assert set(members) == set(VOCABULARY), (cls, set(VOCABULARY) - set(members))
        expected = str if cls is ReplacementFinding else Severity
        assert members["severity"] is expected, cls
        assert all(members[name] is str for name in VOCABULARY if name != "severity"), (cls, members)


def test_the_replacement_rule_speaks_the_severities_by_their_values() -> None:
    assert (Severity.ERROR.value, Severity.WARNING.value) == (replacements.ERROR, replacements.WARNING)
    tags = {POOL_TAG: "h100", INFINIBAND_TAG: "true"}
    two = [Replaced(f"h100-z1-0{i}", tags, "A", "B", 10, "vmSize") for i in range(2)]
    found = judge(two, []) + judge(two, None)
    assert {Severity(f.severity) for f in found} == {Severity.ERROR, Severity.WARNING}
    assert {f.source for f in found} == {replacements.POLICY}


def test_each_severity_reads_back_from_what_the_outputs_write() -> None:
    """The outputs keep their words (summary.json's enforcement, the diff's severity, verify's status); each maps
    to one severity and back."""
    violation = Violation("p", "d", "high", Severity.WARNING, "", "m", "")
    assert violation.as_dict()["enforcement"] == "advisory" and violation.as_dict()["urn"] is None
    assert Violation.from_dict(violation.as_dict()) == violation
    flag = Flag(Severity.ERROR, "moved-block", "pool-system", "m")
    assert flag.as_dict() == {"severity": "error", "kind": "moved-block", "resource": "pool-system", "message": "m",
                              "fix": None}
    assert Result("c", "s", "fail", "d").severity is Severity.ERROR
    assert Result("c", "s", "pass", "d").as_dict() == {"check": "c", "subject": "s", "status": "pass", "detail": "d",
                                                        "fix": "", "source": ""}


PACK_ALONE = """
import importlib.abc, sys
class Refuse(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("components", "gpucluster", "policies", "tests"):
            raise ImportError("the pack runs without " + name)
sys.meta_path.insert(0, Refuse())
import rules, rules.replacements
print(len(rules.ALL_POLICIES), rules.replacements.ERROR)
"""


def test_the_pack_folder_runs_without_components() -> None:
    """The constraint the replacement rule's spelled severities rest on: policies/__main__.py imports `rules` from
    the pack's own folder, with nothing of components/ (the Pulumi CLI runs the folder as it is)."""
    done = subprocess.run([sys.executable, "-c", PACK_ALONE], cwd=ROOT / "policies", capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[1] == Severity.ERROR.value
