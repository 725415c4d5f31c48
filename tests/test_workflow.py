"""The PR workflow and the README run `pulumi preview`/`pulumi up` with the pack and each stack's own config.

- `pulumi preview --json` lists unchanged resources only with `--show-sames` (pulumi/pulumi
  pkg/backend/display/json.go, ShowPreviewDigest: a step is added when `shouldShow(m, opts)`, which for
  `same` steps is `opts.ShowSameResources`); without them the stack rules `gpucluster check` runs judge part
  of the stack (docs/policies.md).
- The pack config is `--policy-pack-config <file>` (pulumi/pulumi pkg/cmd/pulumi/operations/preview.go and
  up.go, flags `--policy-pack` and `--policy-pack-config`).

The workflow's steps are run as GitHub runs them (bash, `${{ matrix.stack }}` filled in) with a `pulumi` on
PATH that records its arguments, for every stack under stacks/.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.stacks import ROOT
from tools.golden import stack_names

WORKFLOW = ROOT / ".github" / "workflows" / "pr-review.yml"
STACK_NAMES = stack_names()
"""The shipped stacks (tools/golden.py SHIPPED_STACKS): a stack of a user's own in stacks/ needs no README lines."""
RECORDER = """#!/bin/sh
python3 -c 'import json, sys; print(json.dumps(sys.argv[1:]))' "$@" >> "$RECORD"
# `pulumi config get KEY --stack S` prints the value from stacks/Pulumi.S.yaml, or fails when it is unset
if [ "$1" = config ]; then
  exec python3 -c '
import sys, yaml
args = sys.argv[1:]
config = yaml.safe_load(open(f"stacks/Pulumi.{args[args.index(\"--stack\") + 1]}.yaml"))["config"]
value = config.get(f"gpucluster:{args[2]}")
sys.exit(1) if value is None else print(value)
' "$@"
fi
echo '{"steps": []}'
"""


def _steps(command: str) -> list[dict[str, Any]]:
    """Steps whose script runs `command` (at the start of a line, with or without `.venv/bin/`; not in a comment)."""
    workflow = yaml.safe_load(WORKFLOW.read_text())
    runs = re.compile(rf"^\s*(\.venv/bin/)?{re.escape(command)}\b", re.M)
    return [step for job in workflow["jobs"].values() for step in job.get("steps", [])
            if runs.search(str(step.get("run", "")))]


def _run(script: str, stack: str, tmp_path: Path) -> list[list[str]]:
    """The step's script for `stack`, in a copy of the project's policies/config, with `pulumi` and
    `.venv/bin/gpucluster` recording their arguments; returns each recorded call."""
    work = tmp_path / stack
    shutil.copytree(ROOT / "policies" / "config", work / "policies" / "config")
    shutil.copytree(ROOT / "stacks", work / "stacks")
    bin_dir = work / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "activate").write_text(f'PATH="{bin_dir}:$PATH"\n')
    for name in ("pulumi", "gpucluster"):
        (bin_dir / name).write_text(RECORDER)
        (bin_dir / name).chmod(stat.S_IRWXU)
    filled = re.sub(r"\$\{\{\s*matrix\.stack\s*\}\}", stack, script)
    assert "${{" not in filled, f"the step uses an expression this test does not fill in: {filled}"
    record = work / "calls.jsonl"
    env = {**os.environ, "RECORD": str(record), "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    # GitHub runs `run:` with `bash -e {0}` (docs.github.com, workflow syntax, jobs.<job_id>.steps[*].shell)
    result = subprocess.run(["bash", "-e", "-c", filled], cwd=work, env=env, capture_output=True, text=True,
                            timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    return [json.loads(line) for line in record.read_text().splitlines()] if record.exists() else []


def _flag(args: list[str], flag: str) -> list[str]:
    return [args[i + 1] for i, arg in enumerate(args[:-1]) if arg == flag]


def _own_config(stack: str) -> list[str]:
    path = f"policies/config/{stack}.json"
    return [path] if (ROOT / path).is_file() else []


def test_the_workflow_has_pulumi_preview_steps() -> None:
    assert len(_steps("pulumi preview")) == 1 and len(_steps("gpucluster check")) == 1


@pytest.mark.parametrize("stack", STACK_NAMES)
def test_each_pulumi_preview_shows_sames_with_the_stacks_own_config(stack: str, tmp_path: Path) -> None:
    """Before: the preview saved for `gpucluster check` lacked `--show-sames`."""
    for step in _steps("pulumi preview"):
        [call] = [c for c in _run(step["run"], stack, tmp_path) if c[:1] == ["preview"]]
        assert "--show-sames" in call and "--json" in call
        assert _flag(call, "--stack") == [stack]
        assert _flag(call, "--policy-pack") == ["policies"]
        assert _flag(call, "--policy-pack-config") == _own_config(stack)


@pytest.mark.parametrize("stack", STACK_NAMES)
def test_gpucluster_check_judges_with_the_stacks_own_config(stack: str, tmp_path: Path) -> None:
    for step in _steps("gpucluster check"):
        [call] = _run(step["run"], stack, tmp_path)
        assert call[:2] == ["check", "preview.json"]
        assert _flag(call, "--stack") == [stack]  # check takes the stack's own config from its stack file


def _readme_commands() -> list[list[str]]:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## With the real Pulumi CLI", 1)[1].split("\n## ", 1)[0]
    commands = []
    for block in re.findall(r"```sh\n(.*?)```", section, re.S):
        for line in block.replace("\\\n", " ").splitlines():
            words = shlex.split(line, comments=True)
            if words[:1] == ["pulumi"]:
                commands.append(words)
    return commands


def test_the_readme_previews_and_deploys_each_stack_with_its_own_pack_config() -> None:
    """Before: the README previewed prod with dev's config and ran `pulumi up` without the pack."""
    selected: str | None = None
    done: dict[str, set[str]] = {}
    for words in _readme_commands():
        if words[1:3] == ["stack", "select"]:
            selected = words[3]
        elif words[1] in ("preview", "up"):
            assert selected is not None, f"`{' '.join(words)}` runs before any `pulumi stack select`"
            assert _flag(words, "--policy-pack") == ["policies"], words
            assert _flag(words, "--policy-pack-config") == _own_config(selected), words
            done.setdefault(selected, set()).add(words[1])
    missing = {stack: sorted({"preview", "up"} - done.get(stack, set())) for stack in STACK_NAMES
               if done.get(stack) != {"preview", "up"}}
    assert not missing, ("README.md, \"With the real Pulumi CLI\": give each shipped stack `pulumi stack select <stack>` "
                         "then `pulumi preview` and `pulumi up` with --policy-pack policies --policy-pack-config "
                         f"policies/config/<stack>.json; missing: {missing}")
    assert set(done) <= set(STACK_NAMES), f"README commands for stacks that are not shipped: {set(done) - set(STACK_NAMES)}"
