"""make e2e's shared pieces: the report every scenario writes to (out/e2e/report.json, written when the session
ends), the shipped stacks planned by the real CLI, and one real control plane started from dev's rendered
API-server boot document, shared by the scenarios that talk to an API server."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from e2e import control_plane as cp
from e2e.cluster import Stack, apply_stack, kubectl
from e2e.kwok import dumps, node_templates, start_kwok
from e2e.report import E2EReport
from gpucluster.offline.mock_values import name_registries_offline
from gpucluster.planning.cluster_plan import plan_cluster
from tests.support.stacks import stack_spec

name_registries_offline()  # before any stack loads; the plans' subprocesses inherit it
ROOT = Path(__file__).resolve().parents[2]
_REPORT = E2EReport()
_RUNNING: list[Callable[[], None]] = []
"""Stops for what the session fixtures started, for a scenario that needs the machine to itself."""


def stop_running() -> None:
    while _RUNNING:
        _RUNNING.pop()()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """prod's full-size scenario last: it stops dev's control plane first."""
    items.sort(key=lambda item: item.path.name == "test_prod_scale.py")


def pytest_sessionfinish(session: pytest.Session) -> None:
    _REPORT.write()


@pytest.fixture(scope="session")
def report() -> E2EReport:
    return _REPORT


def plan_stack(stack: str, out: Path) -> Path:
    """`gpucluster plan <stack> --out <out>` as a user runs it."""
    result = subprocess.run([sys.executable, "-m", "gpucluster.cli", "plan", stack, "--out", str(out), "--quiet"],
                            cwd=ROOT, capture_output=True, text=True, timeout=900)
    if result.returncode != 0:
        raise RuntimeError(f"gpucluster plan {stack} exited {result.returncode}:\n{result.stdout}\n{result.stderr}")
    return out


@pytest.fixture(scope="session")
def dev_out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return plan_stack("dev", tmp_path_factory.mktemp("plan") / "dev")


@pytest.fixture(scope="session")
def control_plane(dev_out: Path, tmp_path_factory: pytest.TempPathFactory, report: E2EReport) -> Iterator[cp.ControlPlane]:
    plane = cp.start(dev_out / "boot" / "apiserver.yaml", tmp_path_factory.mktemp("control-plane"))
    _RUNNING.append(plane.stop)
    report.measured["control_plane"] = {"kubeadm": plane.kubeadm_log,
                                        "programs": [p.name for p in plane.programs]}
    try:
        yield plane
    finally:
        plane.stop()


@pytest.fixture(scope="session")
def dev_stack(control_plane: cp.ControlPlane, dev_out: Path, tmp_path_factory: pytest.TempPathFactory,
              report: E2EReport) -> Iterator[Stack]:
    work = tmp_path_factory.mktemp("dev-stack")
    kwok_program = start_kwok(control_plane.admin_kubeconfig, work)
    _RUNNING.append(kwok_program.stop)
    try:
        plan = plan_cluster(stack_spec("dev"))
        nodes = [t.node(i) for t, count in node_templates(plan, dev_out) for i in range(count)]
        created = kubectl(control_plane, "apply", "-f", "-", stdin=dumps(nodes))
        assert created.returncode == 0, created.stderr
        names = [n["metadata"]["name"] for n in nodes]
        cp.wait_until(lambda: _ready_nodes(control_plane) >= len(names), 300, "kwok's nodes Ready", kwok_program)
        applied = apply_stack(control_plane, dev_out, work)
        report.applied["dev"] = applied.applied
        report.refused["dev"] = [f"{k}: {v}" for k, v in applied.refused.items()]
        report.measured["dev_not_applied"] = applied.skipped
        yield Stack(control_plane, dev_out, applied, kwok_program, names)
    finally:
        kwok_program.stop()


def _ready_nodes(plane: cp.ControlPlane) -> int:
    nodes = cp.json_get(plane, "/api/v1/nodes")["items"]
    return sum(1 for n in nodes for c in n.get("status", {}).get("conditions", [])
               if c["type"] == "Ready" and c["status"] == "True")
