"""One check for every entry point (components/offline/program_check.py `check_program`): `gpucluster plan`,
`gpucluster check --stack` over a saved preview and the program under a real engine (its child under mocks) refuse
the same stacks with the same lines, phase by phase."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gpucluster.errors import Problem, SpecError
from gpucluster.offline import custom_data_size, program_check
from gpucluster.offline.engine import ProgramRun, run_program
from gpucluster.offline.preview import preview_document, write_preview
from gpucluster.offline.program_check import PHASES, check_program, new_states
from gpucluster.simulation.check import plan_checked
from gpucluster.spec import load_stack_file
from tests.support.dev_edits import run, stack_with
from tests.support.stacks import ROOT


@pytest.fixture
def dev_preview(dev_run: ProgramRun, tmp_path: Path) -> Path:
    """dev's preview as `gpucluster plan dev` writes it."""
    path = tmp_path / "preview.json"
    write_preview(preview_document(dev_run), path)
    return path


def _engine_config(path: Path) -> dict[str, str]:
    """The stack file's config as the engine hands it to the program (objects as JSON text)."""
    stack = load_stack_file(path, "dev")
    return {k: v if isinstance(v, str) else json.dumps(v) for k, v in stack.config.items()}


def _lines(problems: list[Problem]) -> list[str]:
    return [f"error: {p}" for p in problems]


def test_a_stack_azure_refuses_is_refused_by_plan_check_and_the_program_with_the_same_lines(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`check` judges the preview of that stack's program (under mocks here, as `pulumi preview --json` shows it)."""
    stack = stack_with(tmp_path, {"location": "northeurope"})
    planned, plan_lines = run(["plan", str(stack), "--out", str(tmp_path / "out"), "--quiet"], capsys)
    preview = tmp_path / "northeurope.json"
    write_preview(preview_document(run_program(ROOT / "__main__.py", "gpucluster", "dev",
                                               load_stack_file(stack, "dev").config)), preview)
    checked, check_lines = run(["check", str(preview), "--stack", str(stack)], capsys)
    with pytest.raises(SpecError) as child:
        program_check.check_in_child("gpucluster", "dev", _engine_config(stack))
    assert planned == checked == 2
    assert plan_lines and plan_lines == check_lines == _lines(child.value.problems)
    assert all("is not offered in northeurope" in line for line in plan_lines)
    assert not (tmp_path / "out").exists()


def test_a_later_phase_refuses_in_plan_and_check_alike(tmp_path: Path, dev_preview: Path,
                                                        capsys: pytest.CaptureFixture[str],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The customData phase, with a cap below dev's API-server document: the same lines from both commands."""
    stack = stack_with(tmp_path, {})
    monkeypatch.setattr(custom_data_size, "CUSTOM_DATA_MAX", 10_000)
    planned, plan_lines = run(["plan", str(stack), "--out", str(tmp_path / "out"), "--quiet"], capsys)
    checked, check_lines = run(["check", str(dev_preview), "--stack", str(stack)], capsys)
    assert planned == checked == 2
    assert plan_lines and plan_lines == check_lines
    assert any(line.startswith("error: boot/apiserver.yaml: ") and "customData" in line for line in plan_lines)


def test_dev_as_planned_passes_every_phase(dev_preview: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, lines = run(["check", str(dev_preview), "--stack", "dev"], capsys)
    assert (code, lines) == (0, [])


def test_a_preview_whose_program_orders_nothing_is_refused_by_check(dev_preview: Path, tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """A preview of a program that declares the layer without its dependsOn: the apply-order phase refuses it, as
    it refuses the program itself under `plan` and `pulumi up`."""
    document = json.loads(dev_preview.read_text())
    for step in document["steps"]:
        step["newState"]["dependencies"] = []
    unordered = tmp_path / "unordered.json"
    unordered.write_text(json.dumps(document))
    code, lines = run(["check", str(unordered), "--stack", "dev"], capsys)
    assert code == 2 and lines
    assert all(line.startswith("error: cluster.inCluster: ") and "to exist first" in line for line in lines)


def test_the_first_phase_that_refuses_stops_the_rest(monkeypatch: pytest.MonkeyPatch, dev_run: ProgramRun) -> None:
    plan = plan_checked(load_stack_file(ROOT / "stacks" / "Pulumi.dev.yaml", "dev").spec)
    states = new_states(preview_document(dev_run))
    ran: list[str] = []

    def phase(name: str, refuses: bool) -> program_check.Phase:
        def check(_plan: Any, _states: Any) -> list[Problem]:
            ran.append(name)
            return [Problem(name, "refused")] if refuses else []
        return program_check.Phase(name, check)

    monkeypatch.setattr(program_check, "PHASES", (phase("a", False), phase("b", True), phase("c", True)))
    assert check_program(plan, states) == [Problem("b", "refused")]
    assert ran == ["a", "b"]
    assert PHASES[0].name.startswith("what Azure would refuse")  # the most basic fault first


def test_a_preview_of_changes_only_skips_the_checks_that_need_every_resource(
        dev_preview: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`pulumi preview --json` without --show-sames lists what changes: a Deployment updated alone has its namespace
    and service account nowhere in the document, which the apply-order check would call missing."""
    document = json.loads(dev_preview.read_text())
    deployment = next(s for s in document["steps"] if s["newState"]["type"] == "kubernetes:apps/v1:Deployment")
    changed = {**document, "steps": [{**deployment, "op": "update", "oldState": deployment["newState"]}]}
    path = tmp_path / "changes.json"
    path.write_text(json.dumps(changed))
    code, lines = run(["check", str(path), "--stack", "dev"], capsys)
    assert (code, lines) == (0, [])
    states = new_states(changed)
    plan = plan_checked(load_stack_file(ROOT / "stacks" / "Pulumi.dev.yaml", "dev").spec)
    assert check_program(plan, states) != []  # what it would wrongly say with every phase
    assert check_program(plan, states, every_resource=False) == []
