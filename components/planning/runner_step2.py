"""Step 2 of the first `pulumi up`, and every later update, on the deployment runner: the script a managed Run
Command runs there and the one command that starts it from anywhere with ARM access.

Managed Run Command (azure-compute-docs `articles/virtual-machines/linux/run-command-managed.md`, commit
2193989863583026950f1e427239f77ead29b001): the VM agent runs the script as root; on Linux each named parameter is
an environment variable of the script; protected parameters are "encrypted during transmission and will not be
logged" (azure-cli 2.91.0 `vm/_params.py`); the instance view keeps the last 4 KB of output, so the script also
writes its whole log on the runner. `az vm run-command create` takes `--parameters`/`--protected-parameters` as
`NAME=VALUE` words split at the first `=`, `--async-execution false` waits for the script, `--timeout-in-seconds`
bounds it (azure-cli 2.91.0 `vm/custom.py` vm_run_command_create; components/catalog/az_cli_args.json).

Pure: text only."""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from components.catalog.deploy_runner import READY_FILE, TOOLS
from components.planning.deploy_runner import RUN_COMMAND_NAME, DeployRunnerPlan

LOG_FILE = "/var/log/gpucluster-step2.log"
SCRIPT_FILE = "first-up/step2.sh"
"""The script in the plan's output folder, which the command reads."""
CLIENT_ID_OUTPUT = "deployRunnerClientId"
"""The stack output with the runner identity's client id (__main__.py)."""

BACKEND_URL = '"BACKEND_URL=$(pulumi whoami --json | python3 -c \'import json,sys; print(json.load(sys.stdin)["url"])\')"'
"""The backend `pulumi whoami --json` reports (its `url`: pulumi/pulumi 1b5949891b3c pkg/cmd/pulumi/whoami/whoami.go)."""
PARAMETERS = ("STACK", "POLICY_CONFIG", "REF", "CLIENT_ID", "BACKEND_URL")
PROTECTED = ("REPOSITORY", "PULUMI_ACCESS_TOKEN", "PULUMI_CONFIG_PASSPHRASE")
"""The repository URL may carry a token; the backend's token and the stack's passphrase are secrets. One left unset
in the shell that runs the command is sent empty, and the script unsets an empty one."""

STEP2_SCRIPT = r"""#!/bin/bash
# Step 2 of the first `pulumi up` (and every later update), run on the deployment runner by a managed Run Command.
# Parameters (environment): STACK, POLICY_CONFIG, REF, CLIENT_ID, BACKEND_URL; protected: REPOSITORY,
# PULUMI_ACCESS_TOKEN, PULUMI_CONFIG_PASSPHRASE (empty when the backend or the stack does not use them).
set -euo pipefail
: "${STACK:?}" "${REF:?}" "${CLIENT_ID:?}" "${BACKEND_URL:?}" "${REPOSITORY:?}"
export HOME="${HOME:-/root}"
export PATH="${TOOLS:-@TOOLS@}/pulumi:${TOOLS:-@TOOLS@}/az/bin:$PATH"
log="${LOG_FILE:-@LOG_FILE@}"
exec > >(tee -a "$log") 2>&1
if [ ! -f "${READY_FILE:-@READY_FILE@}" ]; then
  echo "the runner is still installing its tools (cloud-init): run the command again in a few minutes" >&2
  exit 1
fi
[ -n "${PULUMI_ACCESS_TOKEN:-}" ] || unset PULUMI_ACCESS_TOKEN
[ -n "${PULUMI_CONFIG_PASSPHRASE:-}" ] || unset PULUMI_CONFIG_PASSPHRASE
# The runner's identity for az (image waits, ACR Tasks), azure-native (useMsi) and the scale sets' provider
# (azure-identity's DefaultAzureCredential reads AZURE_CLIENT_ID).
az login --identity --client-id "$CLIENT_ID" --output none
subscription=$(az account show --query id --output tsv)
export AZURE_CLIENT_ID="$CLIENT_ID"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
git clone --quiet "$REPOSITORY" "$work/project"
cd "$work/project"
git checkout --quiet --detach "$REF"
make install
pulumi login "$BACKEND_URL"
pulumi stack select "$STACK"
pulumi config set azure-native:useMsi true
pulumi config set azure-native:clientId "$CLIENT_ID"
pulumi config set azure-native:subscriptionId "$subscription"
# --refresh: a scale set whose allocation ended Failed reads Failed and is written again (docs/operations.md).
# POLICY_CONFIG empty: the stack has no pack config of its own and the pack runs with its defaults.
pulumi up --refresh --yes --non-interactive --policy-pack policies ${POLICY_CONFIG:+--policy-pack-config "$POLICY_CONFIG"}
echo "step 2 done at $REF; the whole log is $log on the runner"
""".replace("@TOOLS@", TOOLS).replace("@LOG_FILE@", LOG_FILE).replace("@READY_FILE@", READY_FILE)


@dataclass(frozen=True)
class Step2Command:
    argv: tuple[str, ...]
    """The `az` words before the parameters."""
    parameters: tuple[str, ...]
    protected: tuple[str, ...]

    def text(self) -> str:
        """One shell command: the values in `$(...)` are read where it runs (the project's checkout, logged in to
        the backend and to Azure, as after step 1)."""
        return " ".join([*self.argv, "--parameters", *self.parameters, "--protected-parameters", *self.protected])


def step2_command(runner: DeployRunnerPlan, resource_group: str, stack: str, policy_config: str,
                  out_dir: str) -> Step2Command:
    argv = ("az", "vm", "run-command", "create", "--resource-group", shlex.quote(resource_group),
            "--vm-name", shlex.quote(runner.vm_name),
            "--name", RUN_COMMAND_NAME, "--async-execution", "false",
            "--timeout-in-seconds", str(runner.run_timeout_seconds),
            "--script", f'"$(cat {shlex.quote(f"{out_dir}/{SCRIPT_FILE}")})"')
    parameters = (f"STACK={shlex.quote(stack)}", f"POLICY_CONFIG={shlex.quote(policy_config)}",
                  '"REF=$(git rev-parse HEAD)"', f'"CLIENT_ID=$(pulumi stack output {CLIENT_ID_OUTPUT})"',
                  BACKEND_URL)
    protected = ('"REPOSITORY=$(git remote get-url origin)"', '"PULUMI_ACCESS_TOKEN=${PULUMI_ACCESS_TOKEN:-}"',
                 '"PULUMI_CONFIG_PASSPHRASE=${PULUMI_CONFIG_PASSPHRASE:-}"')
    return Step2Command(argv, parameters, protected)
