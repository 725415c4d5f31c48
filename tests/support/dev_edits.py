"""dev's stack file with changes, written where a test wants it, and `gpucluster` run in this process with the
`error:` lines it prints."""

from __future__ import annotations

import copy
import signal
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpucluster.cli import main
from tests.support.stacks import ROOT

DEV = yaml.safe_load((ROOT / "stacks" / "Pulumi.dev.yaml").read_text())


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str]]:
    """`gpucluster <args>` in this process: its exit code and the `error:` lines on stderr."""
    handler = signal.getsignal(signal.SIGINT)
    try:
        code = main(args)
    finally:
        signal.signal(signal.SIGINT, handler)
    return code, [line for line in capsys.readouterr().err.splitlines() if line.startswith("error: ")]


def stack_with(tmp_path: Path, change: dict[str, Any], name: str = "dev") -> Path:
    """dev's stack file with each dotted cluster key set (`{"inCluster.enabled": False}`), no policy config, as
    `Pulumi.<name>.yaml` in `tmp_path`."""
    doc = copy.deepcopy(DEV)
    cluster = doc["config"]["gpucluster:cluster"]
    for dotted, value in change.items():
        *parents, leaf = dotted.split(".")
        node = cluster
        for key in parents:
            node = node.setdefault(key, {})
        node[leaf] = value
    doc["config"].pop("gpucluster:policyConfig", None)
    path = tmp_path / f"Pulumi.{name}.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path
