"""Step 2's Pulumi commands under the real Pulumi CLI (e2e/consumers.py `pulumi`: v3.274.0, the release nearest the
pinned v3.272.0 that the Go module proxy serves): the workstation logs in, `gpucluster backend-url` names the backend
a `pulumi login` elsewhere takes, and step2.sh's own `pulumi login`, `stack select` and `config set` lines run as
the runner runs them, with a passphrase-encrypted stack, against a file:// backend.

What cannot run here, and why: a `pulumi login` to Pulumi Cloud or to an azblob:// container reaches the network
(only the URL form is judged offline, below); `pulumi preview` of the program needs the Python language host,
`pulumi-language-python`, whose module the proxy does not serve (e2e/consumers.py NOT_BUILT), so the program's own
refusals run under tests/test_program_check.py's child instead."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from e2e.consumers import PULUMI, binary
from e2e.report import E2EReport
from gpucluster.planning.runner_step2 import STEP2_SCRIPT

ROOT = Path(__file__).resolve().parents[2]


def _pulumi(*args: str, home: Path, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "PULUMI_HOME": str(home), "PULUMI_SKIP_UPDATE_CHECK": "true",
                   "PULUMI_CONFIG_PASSPHRASE": "correct horse", **(env or {})}
    environment.pop("PULUMI_BACKEND_URL", None)
    environment.pop("PULUMI_ACCESS_TOKEN", None)
    return subprocess.run([str(binary("pulumi")), *args, "--non-interactive"], cwd=cwd, env=environment,
                          capture_output=True, text=True, timeout=120)


def _backend_url(home: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PULUMI_HOME": str(home), "PYTHONPATH": str(ROOT)}
    env.pop("PULUMI_BACKEND_URL", None)
    return subprocess.run([sys.executable, "-m", "gpucluster.cli", "backend-url"], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=60)


def _project(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "Pulumi.yaml").write_text("name: gpucluster\nruntime:\n  name: python\n")
    return folder


def test_the_cli_reports_its_release(report: E2EReport, tmp_path: Path) -> None:
    done = _pulumi("version", home=tmp_path / "home", cwd=tmp_path)
    report.scenario("the Pulumi CLI built from the module proxy", "passed", version=done.stdout.strip())
    assert done.returncode == 0 and done.stdout.strip() == PULUMI


def test_step_twos_login_stack_and_config_commands_run_with_the_backend_the_workstation_names(
        report: E2EReport, tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    workstation, runner = tmp_path / "workstation-home", tmp_path / "runner-home"
    project = _project(tmp_path / "checkout")
    assert _pulumi("login", f"file://{state}", home=workstation, cwd=project).returncode == 0
    made = _pulumi("stack", "init", "dev", "--secrets-provider", "passphrase", home=workstation, cwd=project)
    assert made.returncode == 0, made.stderr
    named = _backend_url(workstation, project)
    assert named.returncode == 0 and named.stdout.strip() == f"file://{state}", named.stderr
    whoami = _pulumi("whoami", "--json", home=workstation, cwd=project)

    # The runner: a fresh PULUMI_HOME, a fresh checkout, and step2.sh's own lines with its parameters.
    lines = [line for line in STEP2_SCRIPT.splitlines()
             if line.startswith(("pulumi login", "pulumi stack select", "pulumi config set"))]
    assert [line.split()[1] for line in lines] == ["login", "stack", "config", "config", "config"], lines
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    (fake_bin / "pulumi").symlink_to(binary("pulumi"))
    script = "set -euo pipefail\n" + "\n".join(lines) + "\npulumi config get azure-native:clientId\n"
    env = {**os.environ, "PATH": f"{fake_bin}:{os.environ['PATH']}", "PULUMI_HOME": str(runner),
           "PULUMI_SKIP_UPDATE_CHECK": "true", "PULUMI_CONFIG_PASSPHRASE": "correct horse",
           "BACKEND_URL": named.stdout.strip(), "STACK": "dev", "CLIENT_ID": "client-1"}
    env.pop("PULUMI_BACKEND_URL", None)
    clone = _project(tmp_path / "clone")
    # The stack file comes with the checkout (its passphrase salt in `encryptionsalt`), as the runner's git clone has it.
    (clone / "Pulumi.dev.yaml").write_text((project / "Pulumi.dev.yaml").read_text())
    ran = subprocess.run(["bash", "-c", script.replace("$subscription", "sub-1")], cwd=clone,
                         env=env, capture_output=True, text=True, timeout=180)
    report.scenario("step 2's login, stack and config lines under the real Pulumi CLI (file:// backend)",
                    "passed" if ran.returncode == 0 else "failed", backend=named.stdout.strip(), lines=lines,
                    whoami=whoami.stdout.strip(), stderr=ran.stderr[-500:])
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip().splitlines()[-1] == "client-1"
    secret = _pulumi("config", "set", "--secret", "token", "s3cr3t", "--stack", "dev", home=runner, cwd=tmp_path / "clone")
    assert secret.returncode == 0, secret.stderr
    read = _pulumi("config", "get", "token", "--stack", "dev", home=runner, cwd=tmp_path / "clone")
    assert read.stdout.strip() == "s3cr3t" and "s3cr3t" not in (tmp_path / "clone" / "Pulumi.dev.yaml").read_text()


@pytest.mark.parametrize("url", ["https://app.pulumi.com/someone", "app.pulumi.com/someone"])
def test_the_console_url_whoami_reports_for_pulumi_cloud_is_one_login_refuses(tmp_path: Path, url: str,
                                                                               report: E2EReport) -> None:
    """What step 2 used to send (`pulumi whoami --json` .url of a Pulumi Cloud login): the CLI refuses it before any
    network; the backend `gpucluster backend-url` names for such a login is the API URL the login stored."""
    refused = _pulumi("login", url, home=tmp_path / "home", cwd=tmp_path, env={"PULUMI_ACCESS_TOKEN": "pul-x"})
    assert refused.returncode != 0 and "is not a valid self-hosted backend" in refused.stderr, refused.stderr
    home = tmp_path / "cloud-home"
    home.mkdir()
    # What `pulumi login` stores for Pulumi Cloud (it cannot run here: it checks the token with the service).
    (home / "credentials.json").write_text('{"current": "https://api.pulumi.com", "accounts": {}}')
    named = _backend_url(home, _project(tmp_path / "checkout"))
    report.scenario(f"pulumi login {url} refused by the real CLI", "passed", refusal=refused.stderr.strip()[-300:],
                    named=named.stdout.strip())
    assert named.stdout.strip() == "https://api.pulumi.com"


def test_the_backend_url_follows_the_clis_own_order(tmp_path: Path) -> None:
    """PULUMI_BACKEND_URL over the project's backend.url over the stored login, as the CLI picks its backend; with
    none, a one-line error naming the fix, exit 2."""
    project = _project(tmp_path / "checkout")
    home = tmp_path / "home"
    assert _pulumi("login", f"file://{tmp_path}", home=home, cwd=project).returncode == 0
    (project / "Pulumi.yaml").write_text(f"name: gpucluster\nruntime: python\nbackend:\n  url: file://{project}\n")
    assert _backend_url(home, project).stdout.strip() == f"file://{project}"
    with_env = subprocess.run([sys.executable, "-m", "gpucluster.cli", "backend-url"], cwd=project,
                              env={**os.environ, "PULUMI_HOME": str(home), "PYTHONPATH": str(ROOT),
                                   "PULUMI_BACKEND_URL": "file:///elsewhere"}, capture_output=True, text=True, timeout=60)
    assert with_env.stdout.strip() == "file:///elsewhere"
    nowhere = _backend_url(tmp_path / "empty-home", _project(tmp_path / "other"))
    assert nowhere.returncode == 2 and nowhere.stderr.count("\n") == 1 and "pulumi login" in nowhere.stderr
