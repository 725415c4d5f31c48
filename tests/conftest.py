"""Shared fixtures: the shipped stacks' specs and a small spec builder, and the plans many tests read, made once per
test run: under pytest-xdist (`make test` runs `pytest -n auto`) the workers share them through files in the run's
temporary folder, built by the first worker that asks, under a lock (`shared_once`)."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import pickle
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from gpucluster.offline.engine import ProgramRun, run_program
from gpucluster.offline.mock_values import name_registries_offline
from gpucluster.spec import ClusterSpec, load_stack_file
from tests.support.stacks import ROOT, STACKS, stack_spec

name_registries_offline()  # before any stack loads; the plans' subprocesses inherit it

# Hypothesis's default 200 ms per example, and its check on the time spent generating data, are wall-clock bounds a
# loaded machine (or a collection pause in a worker holding the shared plans) can pass; a test that bounds an
# example's time sets its own deadline (test_stack_fuzz.py).
settings.register_profile("suite", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("suite")

pytest_plugins = ("tests.support.rollout_world", "tests.support.verify_world")
"""Fixtures of the worlds several test files share (`cluster`; `world`, `live`), found by name."""

SLOW_FIRST = (
    "test_determinism.py", "test_dev_growth.py", "test_cli.py", "test_diff.py", "test_confidential.py",
    "test_components.py", "test_policy_mutations.py", "test_diff_trust.py", "test_versions.py",
    "test_hostile_input.py", "test_output_folder.py", "test_output_faults.py", "test_preview_fuzz.py",
    "test_stack_fuzz.py", "test_break_glass.py", "test_tls_matrix.py", "test_cert_renewal.py", "test_etcd_bootstrap.py",
    "test_node_images.py", "test_verify.py", "test_racks.py", "test_rack_dra.py", "test_preflight_cli.py",
)
"""The files that take longest (`pytest --durations`), queued first: under `--dist loadfile` each file runs on one
worker, so a long one left to the end would leave the other worker idle."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {name: i for i, name in enumerate(SLOW_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: otherwise the collection's order


@pytest.fixture(scope="session")
def prod_spec() -> ClusterSpec:
    return stack_spec("prod")


@pytest.fixture(scope="session")
def dev_spec() -> ClusterSpec:
    return stack_spec("dev")


def _run_folder(factory: pytest.TempPathFactory) -> Path:
    """This test run's temporary root: under xdist each worker's base folder sits in the run's own."""
    base = factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def _digest(*paths: Path) -> str:
    return hashlib.sha256(b"".join(p.read_bytes() for p in paths)).hexdigest()[:16]


def shared_once(factory: pytest.TempPathFactory, key: str, build: Callable[[Path], None]) -> Path:
    """A folder `build` filled once per test run, whichever worker asks first; the others wait on the lock and
    read it. `key` names what was built (with a digest of its inputs); a build that fails leaves nothing
    behind, so the next worker that asks builds it again and fails the same way."""
    root = _run_folder(factory) / "shared"
    root.mkdir(exist_ok=True)
    folder, done = root / key, root / f"{key}.done"
    with (root / f"{key}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            folder.mkdir(exist_ok=True)
            build(folder)
            done.touch()
    return folder


def _program_run(factory: pytest.TempPathFactory, stack: str) -> ProgramRun:
    """A shipped stack's program under the offline engine, run once per test run and shared as a pickle."""
    path = STACKS / f"Pulumi.{stack}.yaml"

    def build(folder: Path) -> None:
        config = load_stack_file(path, stack).config
        run = run_program(ROOT / "__main__.py", "gpucluster", stack, config)
        (folder / "run.pickle").write_bytes(pickle.dumps(run))

    folder = shared_once(factory, f"{stack}-run-{_digest(path)}", build)
    return pickle.loads((folder / "run.pickle").read_bytes())


@pytest.fixture(scope="session")
def prod_run(tmp_path_factory: pytest.TempPathFactory) -> ProgramRun:
    """The prod program under the offline engine, once per test run (about 5 s)."""
    return _program_run(tmp_path_factory, "prod")


@pytest.fixture(scope="session")
def gb300_run(tmp_path_factory: pytest.TempPathFactory) -> ProgramRun:
    """The gb300 program under the offline engine, once per test run."""
    return _program_run(tmp_path_factory, "gb300")


@pytest.fixture(scope="session")
def dev_run(tmp_path_factory: pytest.TempPathFactory) -> ProgramRun:
    """The dev program under the offline engine, once per test run."""
    return _program_run(tmp_path_factory, "dev")


@pytest.fixture(scope="session")
def gb300_program() -> ProgramRun:
    """The gb300 program (NVLink racks, interconnect blocks) under the offline engine, once per test session."""
    stack = load_stack_file(STACKS / "Pulumi.gb300.yaml", "gb300")
    return run_program(ROOT / "__main__.py", "gpucluster", "gb300", stack.config)


def _cli_plan(factory: pytest.TempPathFactory, stack: str, *flags: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    """`gpucluster plan <stack> <flags> --out <folder>/<stack>` in a subprocess, once per test run: its result (exit
    code, stdout, stderr) and the folder it wrote."""
    path = STACKS / f"Pulumi.{stack}.yaml"

    def build(folder: Path) -> None:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        done = subprocess.run([sys.executable, "-m", "gpucluster.cli", "plan", stack, *flags, "--out",
                               str(folder / stack)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
        (folder / "result.json").write_text(json.dumps([done.returncode, done.stdout, done.stderr]))

    name = "-".join((stack, *(f.strip("-") for f in flags), _digest(path)))
    folder = shared_once(factory, name, build)
    code, stdout, stderr = json.loads((folder / "result.json").read_text())
    return subprocess.CompletedProcess(["gpucluster", "plan", stack, *flags], code, stdout, stderr), folder / stack


@pytest.fixture(scope="session")
def dev_cli_plan(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], Path]:
    """`gpucluster plan dev --quiet`, once per test run: the result and out/dev."""
    return _cli_plan(tmp_path_factory, "dev", "--quiet")


@pytest.fixture(scope="session")
def dev_out(dev_cli_plan: tuple[subprocess.CompletedProcess[str], Path]) -> Path:
    """The dev stack planned once per test run: out/dev as `gpucluster plan dev` writes it."""
    result, out = dev_cli_plan
    assert result.returncode == 0, result.stderr
    return out


@pytest.fixture(scope="session")
def prod_cli_plan(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], Path]:
    """`gpucluster plan prod` with its full console output, once per test run: the result and out/prod."""
    return _cli_plan(tmp_path_factory, "prod")
