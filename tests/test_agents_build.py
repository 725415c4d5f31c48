"""The agents image is built server-side: ACR Tasks on an agent pool in the cluster's VNet (no Docker and no route to
the private registry where `pulumi up` runs), for every architecture its nodes have (amd64, and arm64 when a pool is
Grace). Sources: tasks-agent-pools.md (components/catalog/acr_tasks.py); azure-cli `acr/run.py` (`az acr run
--agent-pool --file <task file relative to the uploaded context>`: a FileTaskRunRequest scheduled through ARM);
Azure/acr-builder at 90b22f37 (`graph/step.go` step keys, `builder/parse.go` parseDockerBuildCmd,
`builder/context.go`: every `cmd` step gets the Docker socket and the shared home with the registry login)."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest
import yaml

from gpucluster.azure.registry import BUILD_SCRIPT
from gpucluster.catalog.acr_tasks import AGENT_POOL_NAME
from gpucluster.catalog.fact_files import load_facts
from gpucluster.errors import SpecError
from gpucluster.offline.engine import ProgramRun
from gpucluster.planning import agents_image
from gpucluster.planning.cluster_plan import plan_cluster
from gpucluster.planning.ip_plan import CONTROL_PLANE_BLOCK
from tests.support.stacks import ROOT, small_spec, stack_spec

ACR_KEYS = load_facts("acr_task_keys.json")
"""acr-builder's Task and Step yaml keys, extracted by tools/acr_task_keys.py with the commit they were read at."""


def _parse_docker_build(cmd: str) -> tuple[str, str]:
    """acr-builder builder/parse.go parseDockerBuildCmd: (dockerfile, context) of a `build` step's arguments."""
    fields, prev, dockerfile, context = cmd.split(), "", "", "."
    for value in fields:
        if prev in ("-f", "--file"):
            dockerfile = value
        elif not prev.startswith("-") and not value.startswith("-"):
            context = value
        prev = value
    return dockerfile, context


@pytest.mark.parametrize(("stack", "expected"), [("dev", (agents_image.AMD64,)), ("prod", (agents_image.AMD64,)),
                                                 ("gb300", (agents_image.AMD64, agents_image.ARM64))])
def test_the_image_is_built_for_every_node_architecture(stack: str, expected: tuple[str, ...]) -> None:
    plan = plan_cluster(stack_spec(stack))
    assert plan.registry.agents_platforms == expected
    assert all(agents_image.ARM64 in expected for p in plan.pools if p.arm64)


@pytest.mark.parametrize("targets", [(agents_image.AMD64,), (agents_image.AMD64, agents_image.ARM64)])
def test_the_task_builds_each_platform_and_one_tag_that_names_them_all(targets: tuple[str, ...]) -> None:
    task = yaml.safe_load(agents_image.task_yaml("gpucluster/agents", "1-abc", "base:1", targets))
    assert task["version"] == agents_image.TASK_VERSION
    assert set(task) <= set(ACR_KEYS["task"]["keys"])
    assert all(set(step) <= set(ACR_KEYS["step"]["keys"]) and len(step) == 1 for step in task["steps"])
    builds = [shlex.split(s["build"]) for s in task["steps"] if "build" in s]
    assert [b[b.index("--platform") + 1] for b in builds] == list(targets)
    assert all(_parse_docker_build(" ".join(b)) == ("Dockerfile", ".") for b in builds)
    assert all("BASE_IMAGE=base:1" in b for b in builds)
    image = "{{.Run.Registry}}/gpucluster/agents:1-abc"
    pushed = [t for s in task["steps"] if "push" in s for t in s["push"]]
    if len(targets) == 1:
        assert pushed == [image] and not [s for s in task["steps"] if "cmd" in s]
        return
    assert pushed == [f"{image}-amd64", f"{image}-arm64"]
    cmds = [s["cmd"] for s in task["steps"] if "cmd" in s]
    assert cmds == [f"docker manifest create {image} {image}-amd64 {image}-arm64",
                    f"docker manifest push --purge {image}"]


def test_no_emulation_is_needed_to_build_a_foreign_platform() -> None:
    """A `--platform` build on an amd64 agent runs no arm64 binary only while the Dockerfile runs nothing."""
    instructions = {line.split()[0] for line in agents_image.DOCKERFILE.read_text().splitlines()
                    if line.strip() and not line.startswith("#") and not line.startswith(" ")}
    assert "RUN" not in instructions, instructions


def test_the_stack_declares_the_pool_in_the_vnet_and_builds_through_it(prod_run: ProgramRun) -> None:
    [pool] = [r for r in prod_run.registrations if r.type == "azure-native:containerregistry:AgentPool"]
    assert pool.inputs["agentPoolName"] == AGENT_POOL_NAME and pool.inputs["os"] == "Linux"
    assert str(pool.inputs["virtualNetworkSubnetResourceId"]).endswith(f"/subnets/{CONTROL_PLANE_BLOCK}")
    [build] = [r for r in prod_run.registrations if r.name.endswith("-registry-agents-image")]
    assert build.inputs["create"] == BUILD_SCRIPT and "docker" not in BUILD_SCRIPT.replace("Dockerfile", "")
    assert build.inputs["environment"]["CONTEXT_ARCHIVE"] == agents_image.context_archive()
    assert len(agents_image.context_archive()) < 128 * 1024, "one environment string (Linux MAX_ARG_STRLEN)"
    assert not [v for v in build.inputs["environment"].values() if str(ROOT) in str(v)], "no path of this checkout"
    assert pool.urn in build.dependencies
    registry = plan_cluster(stack_spec("prod")).registry
    assert build.inputs["environment"]["TASK"] == agents_image.task_yaml(
        agents_image.REPOSITORY, registry.agents_tag, registry.agents_base_image, registry.agents_platforms)
    assert registry.serves(registry.agents_base_image)


def test_the_build_script_uploads_the_context_and_the_task_to_the_pool(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "az").write_text('#!/usr/bin/env bash\nprintf "%s\\n" "$@" > "$AZ_LOG"\n'
                                'ls "${@: -1}" > "$AZ_LOG.files"\ncp "${@: -1}/acr-task.yaml" "$AZ_LOG.task"\n')
    (bin_dir / "az").chmod(0o755)
    task = agents_image.task_yaml(agents_image.REPOSITORY, "1-abc", "base:1", (agents_image.AMD64, agents_image.ARM64))
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "AZ_LOG": str(tmp_path / "az"),
           "REGISTRY_NAME": "reg", "AGENT_POOL": AGENT_POOL_NAME, "TASK": task,
           "CONTEXT_ARCHIVE": agents_image.context_archive()}
    # Run from a folder of its own: a program elsewhere, or the runner's fresh checkout, needs no path of this one.
    result = subprocess.run(["bash", "-c", BUILD_SCRIPT], cwd=tmp_path, env=env, capture_output=True, text=True,
                            timeout=30)
    assert result.returncode == 0, result.stderr
    args = (tmp_path / "az").read_text().split("\n")
    assert args[:3] == ["acr", "run", "--registry"] and args[args.index("--agent-pool") + 1] == AGENT_POOL_NAME
    assert args[args.index("--file") + 1] == agents_image.TASK_FILE
    files = set((tmp_path / "az.files").read_text().split())
    assert files == {"Dockerfile", agents_image.TASK_FILE, *agents_image.SCRIPTS}, "exactly what the image copies"
    assert (tmp_path / "az.task").read_text() == task


def test_a_region_without_agent_pools_is_refused_with_the_key() -> None:
    with pytest.raises(SpecError) as error:
        plan_cluster(small_spec(location="westus3"))
    assert [p.path for p in error.value.problems] == ["cluster.location"]


def test_the_key_catalogue_is_extracted_from_go_struct_tags() -> None:
    from tools.acr_task_keys import struct_keys

    source = 'type Step struct {\n\tID string `yaml:"id"`\n\tPush []string `yaml:"push,omitempty"`\n\tx int\n}\n' \
             'type Other struct {\n\tY string `yaml:"other"`\n}\n'
    assert struct_keys(source, "Step") == ["id", "push"]
    assert re.fullmatch(r"[0-9a-f]{40}", ACR_KEYS["commit"]) and ACR_KEYS["source"] == "Azure/acr-builder"
