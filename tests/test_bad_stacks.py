"""Stack files refused as their consumers refuse them, and accepted as Pulumi accepts them.

The cases are data (tests/data/bad_stacks/cases.yaml): the shipped dev stack with one change each, written to a
file and read by the real loader (components/spec/loader.py), then planned; each names its consumer's rule. A
few run end to end through `gpucluster plan`: exit 2, the file and one line on stderr, no traceback.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpucluster.errors import SpecError
from gpucluster.planning.cluster_plan import plan_cluster
from gpucluster.spec import CONFIG_KEY, load_stack_file
from tests.support.cli import gpucluster
from tests.support.stacks import STACKS

CASES = yaml.safe_load((Path(__file__).parent / "data" / "bad_stacks" / "cases.yaml").read_text())
DEV_TEXT = (STACKS / "Pulumi.dev.yaml").read_text()
_STEP = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def _steps(path: str) -> list[str | int]:
    return [int(index) if index else key for key, index in _STEP.findall(path)]


def _set(root: dict[str, Any], path: str, value: Any) -> None:
    *parents, last = _steps(path)
    node: Any = root
    for step in parents:
        node = node[step]
    if isinstance(last, int) and last == len(node):
        node.append(value)
    else:
        node[last] = value


def _get(root: Any, path: str) -> Any:
    for step in _steps(path):
        root = root[step]
    return root


def stack_text(case: dict[str, Any]) -> str:
    """The dev stack file with the case's change."""
    text = DEV_TEXT
    for old, new in case.get("replace", []):
        assert text.count(old) == 1, f"{case['case']}: {old!r} is not in the dev stack once"
        text = text.replace(old, new)
    if not ({"set", "many_cpu_pools", "json_text"} & set(case)):
        return text
    document = yaml.safe_load(text)
    cluster = document["config"][CONFIG_KEY]
    for path, value in case.get("set", {}).items():
        _set(cluster, path, copy.deepcopy(value))
    for i in range(case.get("many_cpu_pools", 0)):
        cluster["pools"].append({"name": f"c{i:02d}", "kind": "cpu", "vmSize": "Standard_D4s_v5", "count": 1})
    if "json_text" in case:
        given = case["json_text"]
        document["config"][CONFIG_KEY] = json.dumps(cluster) if given == "dev" else given
    return yaml.safe_dump(document, sort_keys=False)


def _write(case: dict[str, Any], tmp_path: Path) -> Path:
    path = tmp_path / "Pulumi.dev.yaml"
    path.write_text(stack_text(case))
    return path


def _ids(cases: list[dict[str, Any]]) -> list[str]:
    return [c["case"] for c in cases]


@pytest.mark.parametrize("case", CASES["refused"], ids=_ids(CASES["refused"]))
def test_refused_with_one_line_naming_the_key(case: dict[str, Any], tmp_path: Path) -> None:
    path = _write(case, tmp_path)
    with pytest.raises(SpecError) as caught:
        plan_cluster(load_stack_file(path, "dev").spec)
    lines = [str(p) for p in caught.value.problems]
    assert any(case["error"] in line for line in lines), (case["source"], lines)
    assert all("\n" not in line and len(line) < 600 for line in lines)


@pytest.mark.parametrize("case", CASES["accepted"], ids=_ids(CASES["accepted"]))
def test_accepted_as_pulumi_and_the_consumers_accept_it(case: dict[str, Any], tmp_path: Path) -> None:
    spec = load_stack_file(_write(case, tmp_path), "dev").spec
    plan_cluster(spec)
    read = spec.model_dump(by_alias=True, mode="json")
    for path, value in case.get("expect", {}).items():
        assert _get(read, path) == value, (case["source"], path)


CLI = [c for c in CASES["refused"] if c.get("cli")]


@pytest.mark.parametrize("case", CLI, ids=_ids(CLI))
def test_plan_end_to_end_exits_2_with_one_line(case: dict[str, Any], tmp_path: Path) -> None:
    out, path = tmp_path / "out", _write(case, tmp_path)
    result = gpucluster("plan", str(path), "--quiet", "--out", str(out))
    assert result.returncode == 2, result.stdout + result.stderr
    header, *errors = result.stderr.strip().splitlines()  # the file, then one line per problem
    assert header == f"{path}:" and len(errors) == 1 and case["error"] in errors[0], result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    assert not out.exists()


def test_every_case_names_its_source() -> None:
    for case in CASES["refused"] + CASES["accepted"]:
        assert len(case.get("source", "")) > 10, case["case"]


@pytest.mark.parametrize(("path", "value"), [
    ("name", "dev"), ("location", "eastus2"), ("pools[0].name", "system"), ("pools[0].vmSize", "Standard_D4s_v5"),
    ("teams[0].name", "research"), ("access", {"adminUsername": "azureuser\n"}),
    ("controlPlane.apiServers", {"count": 1, "vmSize": "Standard_D4s_v5\n"}),
])
def test_pattern_fields_refuse_a_trailing_newline(path: str, value: Any, tmp_path: Path) -> None:
    """Field patterns run on pydantic-core's Rust regex (components/spec/base.py), whose `$` ends the text as Go's
    does: a value with a final newline is refused, not matched before it."""
    given = value + "\n" if isinstance(value, str) else value
    with pytest.raises(SpecError, match="does not match the required form"):
        load_stack_file(_write({"case": path, "set": {path: given}}, tmp_path), "dev")
