"""A first `pulumi up` from a workstation or hosted CI runner, which reach ARM only: step 1 excludes the join access
and its dependents and creates what needs only ARM; step 2 runs where the API servers' load balancer is reachable
(components/offline/first_up.py, with the engine's exclusion rules ported from pulumi/pulumi 1b5949891b3c)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from gpucluster.offline.engine import ProgramRun, Registration
from gpucluster.offline.first_up import FIRST_EXCLUDE, excluded, first_up, urn_glob
from gpucluster.spec import ClusterSpec
from tests.support.scale_sets import is_scale_set

API_CLIENTS = re.compile(r"\b(curl|kubectl|helm|docker)\b")


def _reg(name: str, parent: str = "", deps: tuple[str, ...] = (), provider: str = "", type_: str = "t:m:R",
         parent_type: str = "") -> Registration:
    qualified = f"{parent_type}${type_}" if parent_type else type_
    return Registration(f"urn:pulumi:s::p::{qualified}::{name}", type_, name, True, parent, {}, (), False, (), deps,
                        provider)


def test_the_glob_is_the_engines() -> None:
    """deployment.go getMatcher: `**` is `.*`, `*` is `[^:]*`, the rest literal, anchored."""
    urn = "urn:pulumi:dev::gpucluster::gpucluster:index:GpuCluster$gpucluster:kubernetes:JoinAccess$command:local:Command::x"
    assert urn_glob(FIRST_EXCLUDE).match(urn)
    assert urn_glob("urn:pulumi:dev::gpucluster::**").match(urn)
    assert not urn_glob("urn:pulumi:*::gpucluster::x").match("urn:pulumi:a:b::gpucluster::x")  # `*` stops at `:`
    assert not urn_glob("urn:pulumi:dev::gpucluster::gpucluster:index:GpuCluster").match(urn)  # anchored
    assert not urn_glob("**.x").match("urn:pulumi:a::b::c::yx")  # `.` is literal


def test_dependents_are_left_out_through_dependencies_parents_and_providers() -> None:
    root = _reg("a", type_="gpucluster:kubernetes:JoinAccess")
    provider = _reg("prov", parent=root.urn, type_="pulumi:providers:kubernetes")
    child = _reg("child", parent=root.urn)
    dependent = _reg("dep", deps=(child.urn,))
    applied = _reg("obj", provider=f"{provider.urn}::prov-id")
    free = _reg("free")
    out = excluded([root, provider, child, dependent, applied, free], (FIRST_EXCLUDE,))
    assert out == {r.urn for r in (root, provider, child, dependent, applied)}


def test_step_one_needs_only_arm_and_step_two_has_everything_that_needs_the_api(prod_run: ProgramRun,
                                                                                 prod_spec: ClusterSpec) -> None:
    left_out = excluded(prod_run.registrations, (FIRST_EXCLUDE,))
    first = [r for r in prod_run.registrations if r.custom and r.urn not in left_out]
    second = [r for r in prod_run.registrations if r.custom and r.urn in left_out]
    assert not [r.name for r in first if r.type.startswith(("kubernetes:", "pulumi:providers:kubernetes"))]
    for command in (r for r in first if r.type == "command:local:Command"):  # ARM through `az` only
        assert not API_CLIENTS.search(str(command.inputs.get("create", ""))), command.name
    names = {r.name for r in first}
    assert {"prod-registry-agents-image", "prod-registry-agents", "prod-images-gpu-built"} <= names
    assert any(r.inputs.get("vmScaleSetName") == "apiserver" for r in first)
    # 5 etcd + 3 events-etcd members and the deployment runner step 2 runs on (tests/test_deploy_runner.py)
    assert sum(r.type == "azure-native:compute:VirtualMachine" for r in first) == 9
    node_sets = [r for r in prod_run.registrations if is_scale_set({"type": r.type, "inputs": r.inputs})
                 and r.type.startswith("pulumi-python:dynamic")]
    assert node_sets and all(r.urn in left_out for r in node_sets)
    assert all(r.urn in left_out for r in prod_run.registrations if r.name.endswith("-api-ready"))
    summary = first_up(prod_run.registrations, prod_spec, "--policy-pack policies")
    assert [s["resources"] for s in summary["steps"]] == [len(first), len(second)]
    assert summary["steps"][0]["needsTheApi"] == []
    assert summary["steps"][0]["command"].startswith(f"pulumi up --exclude '{FIRST_EXCLUDE}' --exclude-dependents")


def test_the_readme_walks_the_commands_the_plan_prints() -> None:
    from tests.support.stacks import ROOT

    readme = (ROOT / "README.md").read_text()
    assert f"pulumi up --exclude '{FIRST_EXCLUDE}' --exclude-dependents" in readme
    assert "make install" in readme and "az login" in readme


def test_the_report_shows_both_steps(dev_out: Path) -> None:
    summary = json.loads((dev_out / "summary.json").read_text())
    assert [s["step"] for s in summary["firstUp"]["steps"]] == [1, 2]
    report = (dev_out / "report.html").read_text()
    assert "First pulumi up: which run creates what, from where" in report
    assert f"pulumi up --exclude &#x27;{FIRST_EXCLUDE}&#x27; --exclude-dependents" in report
