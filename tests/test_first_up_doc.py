"""docs/operations.md, "The first `up` on a new subscription, step by step": its commands are the ones dev's plan
prints, and its bounds are the code's."""

from __future__ import annotations

import json
import re
from pathlib import Path

from gpucluster.azure.node_images import BUILD_TIMEOUT_MINUTES
from gpucluster.planning.deploy_runner import ALLOCATION_WAIT_SECONDS
from gpucluster.planning.runner_step2 import LOG_FILE, POLL_SECONDS
from tests.support.stacks import ROOT, stack_spec

DOC = ROOT / "docs" / "operations.md"
SHIPPED = ("dev", "prod", "gb300")


def _section() -> str:
    text = DOC.read_text()
    start = text.index("## The first `up` on a new subscription, step by step")
    return text[start:text.index("\n## ", start + 1)]


def test_the_commands_are_the_ones_devs_plan_prints(dev_out: Path) -> None:
    section = _section()
    steps = json.loads((dev_out / "summary.json").read_text())["firstUp"]["steps"]
    assert steps[0]["command"] in section
    assert steps[0]["command"].replace("pulumi up", "pulumi preview", 1) in section
    assert steps[1]["command"].replace(str(dev_out), "out/dev") in section
    assert f"{steps[1]['command'].replace(str(dev_out), 'out/dev')} verify" in section
    assert f"`firstUp.steps[0].resources` = {steps[0]['resources']} for dev" in section


def test_the_bounds_are_the_codes(dev_out: Path) -> None:
    section = _section()
    from gpucluster.planning.deploy_runner import plan_deploy_runner

    timeouts = set()
    for stack in SHIPPED:
        runner = plan_deploy_runner(stack_spec(stack))
        assert runner is not None
        timeouts.add(runner.run_timeout_seconds)
    [timeout] = timeouts
    assert f"({timeout:,} s for every shipped stack" in section
    assert f"`BUILD_TIMEOUT_MINUTES` = {BUILD_TIMEOUT_MINUTES} minutes" in section
    assert f"`ALLOCATION_WAIT_SECONDS` = {ALLOCATION_WAIT_SECONDS:,} s" in section
    assert f"every {POLL_SECONDS} s" in section and LOG_FILE in section
    assert re.search(r"pulumi refresh --import-pending-creates <urn> <id>", section)
