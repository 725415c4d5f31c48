"""The health agent's verdicts (agents/health_agent.py `diag_verdict`, `health_problem`) on
reports shaped as DCGM writes them at the release the GPU operator runs: the keys, status strings and nesting come
from components/catalog/facts/dcgm_output.json, which tools/dcgm_output.py extracted from NVIDIA/DCGM v4.5.2 (gpu-operator v26.3.3
values.yaml `dcgm.version: 4.5.2-1-ubuntu22.04`).

At v4.5.2 a Warn result is written to JSON as "Fail" (dcgmi/Diag.cpp `HelperDisplayDiagResult`'s default
DDR_NO_DISPLAY_WARN), a result that did not run is left out (`HelperJsonAddResult`), a skipped one is "Skip", and a
diagnostic that could not run writes only `runtime_error`."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gpucluster.agents import health_agent as agent
from gpucluster.catalog.fact_files import load_facts
from gpucluster.catalog.in_cluster import DCGM_IMAGE

DCGM = load_facts("dcgm_output.json")
DIAG, HEALTH = DCGM["diag"], DCGM["health"]


def status(kind: str) -> str:
    """The string dcgmi writes to JSON for a result of `kind` (pass, fail, warn, skip)."""
    if kind == "warn" and not DIAG["json_shows_warn"]:
        return DIAG["statuses"]["fail"]
    return DIAG["statuses"][kind]


def diag_report(per_test: dict[str, list[str]], literal: bool = False) -> dict[str, Any]:
    """A `dcgmi diag -j` report: one test per key, one result per GPU with the status of that kind (as JSON writes
    it, or the display string itself with `literal`), and the test's summary (its worst result)."""
    tests = []
    for name, kinds in per_test.items():
        shown = [DIAG["statuses"][k] if literal else status(k) for k in kinds if k != "not_run"
                 or DIAG["not_run_written"] or literal]
        worst = next((s for s in (status("fail"), status("warn"), status("pass"), status("skip")) if s in shown),
                     status("skip"))
        tests.append({"name": name, DIAG["results"]: [
            {"entity_group": "GPU", "entity_group_id": 1, "entity_id": gpu, DIAG["status"]: s}
            for gpu, s in enumerate(shown)], DIAG["test_summary"]: {DIAG["status"]: worst}})
    return {DIAG["top"]: {DIAG["categories"]: [{DIAG["category"]: "Hardware", DIAG["tests"]: tests}]},
            "entity_groups": [{"entity_group": "GPU", "entity_group_id": 1,
                               "entities": [{"entity_id": 0, "device_id": "2330", "serial_num": "1654922000000"}]}],
            "metadata": {"DCGM Version": DCGM["tag"].lstrip("v"), "Driver Version Detected": "580.95.05"}}


DIAG_CASES: dict[str, tuple[int | None, dict[str, Any], str]] = {
    "every GPU passes": (0, diag_report({"memory": ["pass"] * 8, "pcie": ["pass"] * 8}), "pass"),
    "a test skipped on some GPUs": (0, diag_report({"memory": ["pass"] * 8, "pcie": ["skip", "pass"]}), "pass"),
    "a result that did not run": (0, diag_report({"memory": ["pass", "not_run"]}), "pass"),
    "every test skipped": (0, diag_report({"memory": ["skip"] * 8}), "diag-report-invalid"),
    "one GPU warned (JSON writes it as Fail)": (0, diag_report({"memory": ["pass"] * 7 + ["warn"]}), "diag-failed"),
    "a literal Warn (the CLI's string)": (0, diag_report({"memory": ["pass", "warn"]}, literal=True), "diag-failed"),
    "a literal Not Run": (0, diag_report({"memory": ["pass", "not_run"]}, literal=True), "diag-report-invalid"),
    "one GPU failed": (0, diag_report({"memory": ["pass", "fail"]}), "diag-failed"),
    "the diagnostic could not run": (0, {DIAG["top"]: {"version": "4.5.2", DIAG["runtime_error"]: "no GPUs"}},
                                     "diag-report-invalid"),
    "it could not run, exit 226": (226, {DIAG["top"]: {DIAG["runtime_error"]: "no GPUs"}}, "diag-failed"),
}


@pytest.mark.parametrize("case", list(DIAG_CASES))
def test_the_diagnostic_verdict_on_dcgms_own_shapes(case: str) -> None:
    exit_code, report, verdict = DIAG_CASES[case]
    assert agent.diag_verdict(exit_code, json.loads(json.dumps(report))) == verdict


def health_report(overall: str, incidents: dict[int, dict[str, tuple[str, str]]]) -> dict[str, Any]:
    """A `dcgmi health -c -j` report: Overall Health, then per GPU its worst health and an Errors section per system
    (its health as value, its messages as overflow lines), nested as dcgmi's JSON output nests boxers."""
    body: dict[str, Any] = {HEALTH["overall"]: {HEALTH["value"]: HEALTH["statuses"].get(overall, HEALTH["other"])}}
    if incidents:
        body["GPU"] = {HEALTH["children"]: {str(gpu): {
            HEALTH["value"]: HEALTH["statuses"][max((k for k, _ in systems.values()), key=["pass", "warn",
                                                                                            "fail"].index)],
            HEALTH["children"]: {HEALTH["errors"]: {HEALTH["children"]: {
                system: {HEALTH["value"]: HEALTH["statuses"][kind], HEALTH["overflow"]: [message]}
                for system, (kind, message) in systems.items()}}}} for gpu, systems in incidents.items()}}
    return {HEALTH["body"]: body, HEALTH["header_key"]: [HEALTH["header"]]}


@pytest.mark.parametrize(("overall", "incidents", "problem"), [
    ("pass", {}, None),
    ("warn", {0: {"Memory system": ("warn", "A pending row remap on GPU 0")}}, "warning"),
    ("fail", {0: {"Memory system": ("warn", "red")}, 1: {"Memory system": ("fail", "green"),
                                                         "SM system": ("warn", "blue")}}, "failure"),
    ("internal", {}, "internal-error"),
], ids=["healthy", "warning", "failure", "internal-error"])
def test_the_health_verdict_on_dcgms_own_shapes(overall: str, incidents: dict[int, Any], problem: str | None) -> None:
    assert agent.health_problem(health_report(overall, incidents)) == problem


def test_the_shapes_are_of_the_release_the_operator_runs() -> None:
    assert DCGM["repo"] == "NVIDIA/DCGM" and len(DCGM["commit"]) == 40
    assert DCGM_IMAGE.split(":")[1].startswith(DCGM["tag"].lstrip("v") + "-")
