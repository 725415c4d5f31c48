"""The lock files (constraints/*.txt, tools/lock.py): what `make install` and `make test` install, so the plan that was
reviewed and the deployment runner's `make install` run the same packages."""

from __future__ import annotations

from importlib import metadata

from gpucluster.catalog.deploy_runner import PULUMI_CLI_VERSION
from tests.support.stacks import ROOT


def _lock(name: str) -> dict[str, str]:
    lines = (ROOT / "constraints" / name).read_text().splitlines()
    return dict(line.split("==", 1) for line in lines if line and not line.startswith("#"))


def test_this_venv_runs_exactly_the_locked_versions() -> None:
    locked = _lock("dev.txt")
    drifted = {name: (version, metadata.version(name)) for name, version in locked.items()
               if metadata.version(name) != version}
    assert not drifted, f"installed differs from constraints/dev.txt (re-run make install, or python -m tools.lock): {drifted}"


def test_the_runtime_lock_is_the_dev_locks_runtime_part_and_pins_the_runners_cli_release() -> None:
    runtime, dev = _lock("runtime.txt"), _lock("dev.txt")
    assert runtime.items() <= dev.items()
    assert runtime["pulumi"] == PULUMI_CLI_VERSION, "the SDK of the CLI release the runner installs"
    assert {"pulumi-azure-native", "pulumi-kubernetes", "pulumi-command", "azure-identity"} <= runtime.keys()


def test_make_installs_from_the_locks() -> None:
    makefile = (ROOT / "Makefile").read_text()
    assert "$(PIP) -c constraints/runtime.txt -e ." in makefile
    assert "$(PIP) -c constraints/dev.txt -e '.[dev]'" in makefile
