"""The library's one import name, `gpucluster`: a regular install (the wheel, not editable) holds gpucluster/ and
gpucluster/policies/ and nothing else at the top, and a program with a `components/` package of its own runs
examples/own_program beside it under Pulumi's mocks, importing both.

The project keeps its folders (components/, policies/); `gpucluster` is a link to components/ and components/policies
a link to policies/ (pyproject.toml), and no module of ours imports the folder names."""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import gpucluster

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ("components", "policies", "agents", "tools", "tests", "e2e", "bench", "examples", "__main__.py")

RUN = """
import json, sys
from pathlib import Path
import components.errors  # the program's own package of that name
import gpucluster
from gpucluster.offline.engine import run_program
run = run_program(Path("__main__.py"), "research-cluster", "example", {})
print(json.dumps({"gpucluster": gpucluster.__file__, "components": components.errors.__file__,
                  "mine": components.errors.MINE, "outputs": sorted(run.outputs),
                  "clusters": [r.name for r in run.registrations if r.type == "gpucluster:index:GpuCluster"]}))
"""


BUILT_FROM = ("pyproject.toml", "README.md", "gpucluster", "components", "policies", "images", "agents")
"""What the build reads, copied with the links as links: pip builds in the source folder (build/, *.egg-info), and
two test runs at once must not share one."""


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    source, out = tmp_path_factory.mktemp("source"), tmp_path_factory.mktemp("wheel")
    for name in BUILT_FROM:
        if (ROOT / name).is_symlink() or (ROOT / name).is_file():
            shutil.copy(ROOT / name, source / name, follow_symlinks=False)
        else:
            shutil.copytree(ROOT / name, source / name, symlinks=True,
                            ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                            "--disable-pip-version-check", "-q", "-w", str(out), str(source)],
                           capture_output=True, text=True, timeout=600, env={**os.environ, "PIP_NO_INDEX": "1"})
    assert built.returncode == 0, built.stderr[-3000:]
    [found] = out.glob("gpucluster-*.whl")
    return found


def test_the_wheel_holds_gpucluster_and_no_components_or_policies_module(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    top = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert top == {"gpucluster"}
    for needed in ("gpucluster/cluster.py", "gpucluster/diff/compare.py", "gpucluster/policies/rules/__init__.py",
                   "gpucluster/policies/PulumiPolicy.yaml", "gpucluster/catalog/facts/pod_security_baseline.json",
                   "gpucluster/catalog/facts/prices.json", "gpucluster/catalog/facts/metrics_facts.json",
                   "gpucluster/catalog/facts/metrics_consumers.json", "gpucluster/catalog/facts/consumers/flags-etcd.json",
                   "gpucluster/catalog/data/price_answers/answers.json", "gpucluster/agents/rollout.py"):
        assert needed in names, needed
    entry = next(n for n in names if n.endswith("entry_points.txt"))
    assert "gpucluster = gpucluster.cli:main" in zipfile.ZipFile(wheel).read(entry).decode()


def test_a_program_with_its_own_components_package_runs_the_installed_library(wheel: Path, tmp_path: Path) -> None:
    """The defect this name fixes: such a program could not import the library (`components.errors` not found)."""
    site = tmp_path / "site"
    installed = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "-q",
                                "--disable-pip-version-check", "--target", str(site), str(wheel)],
                               capture_output=True, text=True, timeout=300)
    assert installed.returncode == 0, installed.stderr[-3000:]
    program = tmp_path / "program"
    shutil.copytree(ROOT / "examples" / "own_program", program)
    (program / "components").mkdir()
    (program / "components" / "__init__.py").write_text("")
    (program / "components" / "errors.py").write_text("MINE = 'the program\\'s own'\n")
    env = {**os.environ, "PYTHONPATH": str(site), "AZURE_SUBSCRIPTION_ID": "00000000-0000-0000-0000-000000000000"}
    done = subprocess.run([sys.executable, "-c", RUN], cwd=program, env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["gpucluster"].startswith(str(site)) and seen["components"].startswith(str(program))
    assert seen["mine"] == "the program's own" and seen["clusters"] == ["research"]
    assert {"apiServerEndpoint", "kubeconfig", "scaleSetIds"} <= set(seen["outputs"])


def _imported_roots(path: Path) -> set[str]:
    roots = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            roots |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level:
            roots.add((node.module or "").split(".")[0])
    return roots


def test_no_module_imports_the_folder_names() -> None:
    """A `components` or top-level `policies` import would load a second copy of a module beside `gpucluster`'s (the
    pack imports its rules relatively, or as `rules` when the Pulumi CLI runs the folder)."""
    files = [p for s in SOURCES for p in ([ROOT / s] if s.endswith(".py") else (ROOT / s).rglob("*.py"))]
    assert len(files) > 400
    found = sorted(f"{p.relative_to(ROOT)}" for p in files if {"components", "policies", "agents"} & _imported_roots(p))
    assert found == []


def test_the_public_names_load_and_are_listed() -> None:
    assert sorted(gpucluster.__all__) == sorted(gpucluster.EXPORTS)
    for name in gpucluster.__all__:
        value = getattr(gpucluster, name)
        assert isinstance(value, str) or value.__module__.startswith("gpucluster."), name
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        _ = gpucluster.Nope  # type: ignore[attr-defined]
