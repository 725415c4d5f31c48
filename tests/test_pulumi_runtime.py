"""The Pulumi CLI runs the program and the policy pack with the venv `make install` creates, not the system python3
(which lacks pulumi-policy). The path semantics are pulumi/pulumi's (commit 1b5949891b3c): a relative `virtualenv`
is joined to the project's or policy pack's own directory (sdk/python/toolchain/pip.go,
resolveVirtualEnvironmentPath), and a policy pack's root is its folder (sdk/go/common/resource/plugin/plugin.go,
`NewProgramInfo(pluginDir, pluginDir, ...)` for PulumiPolicy.yaml; before that, the removed
sdk/python/dist/pulumi-analyzer-policy-python made it `$PWD/<virtualenv>` with the pack's folder as $PWD)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def resolve_virtualenv(project_dir: Path, virtualenv: str) -> Path:
    """pip.go resolveVirtualEnvironmentPath: absolute as given, else joined to the project's directory."""
    path = Path(virtualenv)
    return path if path.is_absolute() else Path(project_dir, virtualenv)


def makefile_venv() -> Path:
    match = re.search(r"^VENV := (\S+)$", (ROOT / "Makefile").read_text(), re.MULTILINE)
    assert match, "Makefile: no `VENV := <dir>` line"
    return Path(ROOT, match.group(1))


def runtime_options(path: Path) -> dict[str, str]:
    runtime = yaml.safe_load(path.read_text())["runtime"]
    assert runtime["name"] == "python", path
    return runtime["options"]


def test_policy_pack_runs_with_the_venv_make_creates() -> None:
    options = runtime_options(ROOT / "policies" / "PulumiPolicy.yaml")
    assert options.get("toolchain", "pip") == "pip"
    assert "virtualenv" in options, "without it `pulumi preview --policy-pack policies` runs the system python3"
    assert resolve_virtualenv(ROOT / "policies", options["virtualenv"]).resolve() == makefile_venv().resolve()


def test_program_runs_with_the_same_venv() -> None:
    options = runtime_options(ROOT / "Pulumi.yaml")
    assert resolve_virtualenv(ROOT, options["virtualenv"]).resolve() == makefile_venv().resolve()


def test_make_install_puts_the_pack_runtime_in_that_venv() -> None:
    """`make install` is `pip install -e .` into that venv: the pack's own requirements must be runtime deps."""
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    names = {re.split(r"[<>=\[ ]", d, maxsplit=1)[0].lower() for d in deps}
    wanted = {re.split(r"[<>=\[ ]", line, maxsplit=1)[0].lower()
              for line in (ROOT / "policies" / "requirements.txt").read_text().splitlines() if line.strip()}
    assert wanted <= names, wanted - names
    assert "install: $(RUNTIME)" in (ROOT / "Makefile").read_text()
