"""`pulumi up` refuses what `gpucluster plan` refuses (components/offline/program_check.py): the program, under a
real engine, runs the plan's checks on its own registrations in a child process under mocks before it declares
anything. Here the child is run as the program starts it, with the stack config the engine hands the program."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from gpucluster.errors import SpecError
from gpucluster.offline import program_check
from tests.support.cli import gpucluster
from tests.support.stacks import ROOT


def _config(location: str) -> dict[str, str]:
    """dev's stack config as the engine hands it to the program (PULUMI_CONFIG: objects as JSON text)."""
    config = yaml.safe_load((ROOT / "stacks" / "Pulumi.dev.yaml").read_text())["config"]
    config["gpucluster:cluster"]["location"] = location
    config["azure-native:location"] = location
    return {k: v if isinstance(v, str) else json.dumps(v) for k, v in config.items()}


def test_dev_in_northeurope_is_refused_by_the_program_with_the_plans_message(tmp_path: Path) -> None:
    with pytest.raises(SpecError) as refused:
        program_check.check_in_child("gpucluster", "dev", _config("northeurope"))
    [problem] = refused.value.problems
    assert problem.path == "confidential-z3-00 sku.name" and "is not offered in northeurope" in problem.message
    stack = tmp_path / "Pulumi.dev.yaml"
    document = yaml.safe_load((ROOT / "stacks" / "Pulumi.dev.yaml").read_text())
    document["config"] = {k: json.loads(v) if k == "gpucluster:cluster" else v for k, v in _config("northeurope").items()}
    stack.write_text(yaml.safe_dump(document))
    planned = gpucluster("plan", str(stack), "--out", str(tmp_path / "out"), "--quiet")
    assert planned.returncode == 2 and f"{problem.path}: {problem.message}" in planned.stderr.replace("\n", " ")


def test_dev_as_shipped_passes_and_the_child_does_not_check_again() -> None:
    program_check.check_in_child("gpucluster", "dev", _config("eastus2"))


def test_a_child_that_fails_or_cannot_start_is_one_problem_not_a_traceback(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(SpecError) as failed:
        program_check.check_in_child("gpucluster", "dev", {"gpucluster:cluster": "{"})  # not JSON: the child fails
    [problem] = failed.value.problems
    assert problem.path == "program" and problem.message.startswith("the program check ended with exit 1")
    monkeypatch.setattr(program_check, "PROGRAM", Path("/nonexistent/__main__.py"))
    with pytest.raises(SpecError) as unstarted:
        program_check.check_in_child("gpucluster", "dev", _config("eastus2"))
    assert unstarted.value.problems[0].message.startswith("the program check could not start")
