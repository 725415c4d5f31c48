"""Hostile input to `gpucluster check`, `diff` and `plan`: each case ends in one line per problem naming the file and
the JSON path (or the config key), exit 2, never a traceback; every read is bounded before it is read; the policy
config comes from the stack the user names, never from the document; secrets are never echoed.

The cases are files: tests/data/hostile_previews/*.json and tests/data/hostile_configs/* with their expected exit
code and a piece of the expected line in each folder's cases.json; a stack file Pulumi itself loads (a date,
`!!binary`, `!!set` value) is accepted, and its case names the value the program reads and why.
tests/data/previews/dev.json is the preview `gpucluster plan dev` writes. Shapes: pulumi/pulumi
pkg/backend/display/json.go (ShowPreviewDigest) and sdk/go/common/apitype (ResourceV3); JSON: RFC 8259 (no NaN or
Infinity).
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpucluster.cli import main
from gpucluster.spec import load_stack_file
from tests.support.stacks import ROOT, STACKS

DATA = ROOT / "tests" / "data"
DEV_PREVIEW = DATA / "previews" / "dev.json"
PREVIEWS = DATA / "hostile_previews"
CONFIGS = DATA / "hostile_configs"
PREVIEW_CASES: dict[str, dict[str, Any]] = json.loads((PREVIEWS / "cases.json").read_text())
CONFIG_CASES: dict[str, dict[str, Any]] = json.loads((CONFIGS / "cases.json").read_text())


def gpucluster(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """The command in this process (fast: no interpreter start); an exception escaping it fails the test."""
    handler = signal.getsignal(signal.SIGINT)
    try:
        code = main(args)
    except SystemExit as leaving:  # argparse refusing an option
        code = int(leaving.code or 0)
    finally:
        signal.signal(signal.SIGINT, handler)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _one_line_each(err: str, expected: str, where: str) -> None:
    lines = err.strip().splitlines()
    assert lines and all(line.startswith(("error: ", "note: ")) or line.endswith(":") for line in lines), err
    matching = [line for line in lines if expected in line]
    assert matching, err
    assert where in matching[0], matching[0]


@pytest.mark.parametrize("command", ["check", "diff"])
@pytest.mark.parametrize("name", sorted(PREVIEW_CASES))
def test_hostile_previews_end_in_one_line_naming_the_file_and_path(name: str, command: str,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    case, path = PREVIEW_CASES[name], PREVIEWS / f"{name}.json"
    args = ["check", str(path)] if command == "check" else ["diff", str(path), str(DEV_PREVIEW)]
    code, _, err = gpucluster(args, capsys)
    assert code == case["exit"], err
    _one_line_each(err, case["stderr"], str(path))


@pytest.mark.parametrize("name", sorted(CONFIG_CASES))
def test_hostile_configs_end_in_one_line(name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    case, path = CONFIG_CASES[name], CONFIGS / name
    args = [a.format(file=path, dev_preview=DEV_PREVIEW, out=tmp_path / "out") for a in case["command"]]
    code, out, err = gpucluster(args, capsys)
    assert code == case["exit"], err + out[-2000:]
    if "stderr" in case:  # a policy config's line names the file; a stack file's lines follow its name
        _one_line_each(err, case["stderr"], str(path) if path.suffix == ".json" else case["stderr"])
        assert str(path) in err
    assert case.get("stdout", "") in out
    assert max((len(line) for line in err.splitlines()), default=0) <= case.get("max_line", 10**9)
    if code == 2:  # refused: nothing half-written
        assert not (tmp_path / "out").exists()
    for key, value in case.get("config", {}).items():  # accepted: the value as Pulumi reads it (case["reason"])
        assert load_stack_file(path, "hostile").config[key] == value, case["reason"]


def test_a_document_of_too_many_values_is_refused_before_it_is_parsed(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """1.8 MB of `[],` parse to 40 MB of lists; the count of `{`, `[` and `,` stops it before parsing."""
    path = tmp_path / "lists.json"
    path.write_text('{"steps": [' + "[]," * 600_000 + "[]]}")
    code, _, err = gpucluster(["check", str(path)], capsys)
    assert code == 2
    _one_line_each(err, "holds more than 1,000,000 JSON values", str(path))


@pytest.mark.parametrize(("args", "expected"), [
    (["plan", "."], "'.' is not a stack name"),
    (["plan", ".."], "'..' is not a stack name"),
    (["plan", "dev prod"], "'dev prod' is not a stack name"),
    (["check", str(DEV_PREVIEW), "--stack", "../dev"], "--stack: '../dev' is not a stack name"),
    (["check", str(DEV_PREVIEW), "--stack", "."], "--stack: '.' is not a stack name"),
    (["check", str(DEV_PREVIEW), "--stack", "prod"],
     "--stack prod was given, but the preview's resources are of stack 'dev'; pass --stack dev"),
])
def test_stack_names_are_names_and_match_the_preview(args: list[str], expected: str,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """Pulumi's stack-name rule (pulumi/pulumi pkg/backend/httpstate/backend.go, validateStackName:
    `^[A-Za-z0-9_.-]{1,100}$`), minus the names that are folders; a preview is judged as the stack it is of."""
    code, out, err = gpucluster(args, capsys)
    assert code == 2 and expected in err, err
    assert out == ""


def test_a_copied_stack_file_keeps_its_policy_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """stacks/Pulumi.dev.yaml copied as Pulumi.staging.yaml names policies/config/dev.json
    (gpucluster:policyConfig): the copy passes as dev does instead of failing for want of a staging.json."""
    copy = tmp_path / "Pulumi.staging.yaml"
    shutil.copy(STACKS / "Pulumi.dev.yaml", copy)
    code, out, err = gpucluster(["plan", str(copy), "--out", str(tmp_path / "out"), "--quiet"], capsys)
    assert code == 0, out + err
    assert out.strip() == "Policies: no violations"


# --- Reads bounded before they are read: a file far past its cap, in a process limited to 1 GiB of address space.

def _limit_memory() -> None:
    cap = 1 << 30
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))


def _cli(*args: str, timeout: int = 60) -> subprocess.CompletedProcess[str]:
    env = {"PYTHONPATH": str(ROOT), "PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    return subprocess.run([sys.executable, "-m", "gpucluster.cli", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=timeout, preexec_fn=_limit_memory)


def _sparse(path: Path, size: int) -> Path:
    with path.open("wb") as handle:
        handle.truncate(size)  # no disk used: the file is a hole
    return path


def _plan_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "plan"
    (folder / "boot").mkdir(parents=True)
    shutil.copy(DEV_PREVIEW, folder / "preview.json")
    return folder


@pytest.mark.parametrize("kind", ["stack file", "preview", "policy config", "summary.json", "boot document"])
def test_a_file_past_its_cap_costs_the_cap(kind: str, tmp_path: Path) -> None:
    """3 GB files (100 MB for the preview, the size that once took 16 GB), read whole they exhaust 1 GiB."""
    if kind == "stack file":
        args = ["plan", str(_sparse(tmp_path / "Pulumi.big.yaml", 3 << 30)), "--out", str(tmp_path / "out"), "--quiet"]
        expected = "is larger than 1 MiB"
    elif kind == "preview":
        args = ["check", str(_sparse(tmp_path / "preview.json", 100 << 20))]
        expected = "is larger than 32 MiB"
    elif kind == "policy config":
        args = ["check", str(DEV_PREVIEW), "--policy-config", str(_sparse(tmp_path / "config.json", 3 << 30))]
        expected = "is larger than 64 KiB"
    elif kind == "summary.json":
        folder = _plan_folder(tmp_path)
        _sparse(folder / "summary.json", 3 << 30)
        args, expected = ["diff", str(folder), str(DEV_PREVIEW)], "is larger than 4 MiB"
    else:
        folder = _plan_folder(tmp_path)
        _sparse(folder / "boot" / "apiserver.yaml", 3 << 30)
        args, expected = ["diff", str(folder), str(DEV_PREVIEW)], "is larger than 256 KiB"
    result = _cli(*args)
    assert result.returncode == 2, result.stderr[-2000:]
    assert expected in result.stderr and "Traceback" not in result.stderr, result.stderr[-2000:]
    assert len([line for line in result.stderr.splitlines() if line.startswith("error:")]) == 1


@pytest.mark.parametrize("kind", ["preview", "policy config", "stack file"])
def test_a_fifo_is_refused_not_read_forever(kind: str, tmp_path: Path) -> None:
    fifo = tmp_path / ("Pulumi.fifo.yaml" if kind == "stack file" else "fifo.json")
    os.mkfifo(fifo)
    args = {"preview": ["check", str(fifo)],
            "policy config": ["check", str(DEV_PREVIEW), "--policy-config", str(fifo)],
            "stack file": ["plan", str(fifo), "--out", str(tmp_path / "out"), "--quiet"]}[kind]
    result = _cli(*args, timeout=30)
    assert result.returncode == 2 and "is not a regular file" in result.stderr, result.stderr


# --- Secrets: a private key in a field meant for public keys (or mistaken for another) is never echoed.

def _private_key() -> str:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    return Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption()).decode()


@pytest.mark.parametrize("shape", ["keys as text", "keys as a mapping", "access as text", "access as a list",
                                   "admin username", "proxy url"])
def test_a_private_key_is_never_echoed(shape: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    key = _private_key()
    stack = yaml.safe_load((STACKS / "Pulumi.dev.yaml").read_text())
    cluster = stack["config"]["gpucluster:cluster"]
    access = cluster.setdefault("access", {})
    if shape == "keys as text":
        access["sshPublicKeys"] = key
    elif shape == "keys as a mapping":
        access["sshPublicKeys"] = {"ops": key}
    elif shape == "access as text":
        cluster["access"] = key
    elif shape == "access as a list":
        cluster["access"] = [key]
    elif shape == "admin username":
        access["adminUsername"] = key
    else:
        cluster.setdefault("inCluster", {})["apiAccess"] = {"path": "proxy", "proxyUrl": key}
    path = tmp_path / "Pulumi.leak.yaml"
    path.write_text(yaml.safe_dump(stack))
    code, out, err = gpucluster(["plan", str(path), "--out", str(tmp_path / "out")], capsys)
    assert code == 2, err
    body = "".join(key.splitlines()[1:-1])
    pieces = {body[i:i + 12] for i in range(0, len(body) - 12, 6)}
    assert "PRIVATE KEY" not in err + out and not any(piece in err + out for piece in pieces), err
    assert "not shown: this field can hold secrets" in err
