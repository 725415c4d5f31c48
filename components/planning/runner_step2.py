"""Step 2 of the first `pulumi up`, and every later update, on the deployment runner: the script a managed Run
Command runs there (step2.sh) and the script that starts it from anywhere with ARM access and follows it to its end
(start-step2.sh).

Managed Run Command (azure-compute-docs `articles/virtual-machines/linux/run-command-managed.md`, commit
2193989863583026950f1e427239f77ead29b001): the VM agent runs the script as root; on Linux each named parameter is
an environment variable of the script; protected parameters are "encrypted during transmission and will not be
logged" (azure-cli 2.91.0 `vm/_params.py`); the instance view keeps the last 4 KB of output, so the script also
writes its whole log on the runner. `az vm run-command create` takes `--parameters`/`--protected-parameters` as
`NAME=VALUE` words split at the first `=`, `--timeout-in-seconds` bounds the script (azure-cli 2.91.0 `vm/custom.py`
vm_run_command_create; components/catalog/facts/az_cli_args.json). The start script creates it with `--async-execution
true` (the create returns once the command is accepted; no `az` process waits hours on one long-running request)
and follows it with `az vm run-command show --instance-view` (`executionState`, `exitCode`, `output`, `error`). A
value `NAME=@file` is read from the file by azure-cli itself (Azure/azure-cli 2c15d4ec
src/azure-cli-core/azure/cli/core/commands/__init__.py `_expand_file_prefixed_files`, which splits at the first `=`
and loads what follows an `@`), so no secret is ever a word of a command line.

Pure: text only."""

from __future__ import annotations

import shlex

from gpucluster.catalog.deploy_runner import READY_FILE, TOOLS
from gpucluster.planning.deploy_runner import RUN_COMMAND_NAME, DeployRunnerPlan

LOG_FILE = "/var/log/gpucluster-step2.log"
SCRIPT_FILE = "first-up/step2.sh"
"""The script in the plan's output folder, which the command reads."""
CLIENT_ID_OUTPUT = "deployRunnerClientId"
"""The stack output with the runner identity's client id (__main__.py)."""

PARAMETERS = ("STACK", "POLICY_CONFIG", "REF", "CLIENT_ID", "BACKEND_URL", "ACTION")
"""ACTION: `up` (step 2 and every later update) or `verify` (`gpucluster verify` where the API servers answer)."""
PROTECTED = ("REPOSITORY", "PULUMI_ACCESS_TOKEN", "PULUMI_CONFIG_PASSPHRASE")
"""The repository URL may carry a token; the backend's token and the stack's passphrase are secrets. One left unset
in the shell that runs the command is sent empty, and the script unsets an empty one."""

STEP2_SCRIPT = r"""#!/bin/bash
# Step 2 of the first `pulumi up` (and every later update), run on the deployment runner by a managed Run Command.
# Parameters (environment): STACK, POLICY_CONFIG, REF, CLIENT_ID, BACKEND_URL, ACTION (up, or verify: gpucluster verify
# from inside the VNet); protected: REPOSITORY, PULUMI_ACCESS_TOKEN, PULUMI_CONFIG_PASSPHRASE (empty when the backend or
# the stack does not use them).
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
if [ "${ACTION:-up}" = verify ]; then
  # The cluster's checks need the API servers, which answer inside the VNet only; the kubeconfig stays in $work.
  (umask 077; pulumi stack output adminKubeconfig --show-secrets > "$work/admin.conf")
  .venv/bin/gpucluster verify "$STACK" --kubeconfig "$work/admin.conf" --subscription "$subscription"
  exit $?
fi
# --refresh: a scale set whose allocation ended Failed reads Failed and is written again (docs/operations.md).
# POLICY_CONFIG empty: the stack has no pack config of its own and the pack runs with its defaults.
pulumi up --refresh --yes --non-interactive --policy-pack policies ${POLICY_CONFIG:+--policy-pack-config "$POLICY_CONFIG"}
echo "step 2 done at $REF; the whole log is $log on the runner"
""".replace("@TOOLS@", TOOLS).replace("@LOG_FILE@", LOG_FILE).replace("@READY_FILE@", READY_FILE)


START_FILE = "first-up/start-step2.sh"
"""The script that starts step 2 and follows it, beside step2.sh in the plan's output folder."""
POLL_SECONDS = 30

START_SCRIPT = r"""#!/bin/bash
# Step 2 of the first `pulumi up` (and every later update), from anywhere with ARM access: sends step2.sh (beside
# this script) to the deployment runner as a managed Run Command that runs on its own there, then follows it to its
# end and exits with its exit code. Run it from the project's checkout, where git, pulumi (logged in to the stack's
# backend) and gpucluster work; the values below are the plan's. `start-step2.sh verify` runs `gpucluster verify`
# on the runner instead, where the API servers answer.
set -euo pipefail
@VALUES@
action="${1:-up}"
case "$action" in up|verify) ;; *) echo "usage: $0 [up|verify]" >&2; exit 2 ;; esac
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ref=$(git rev-parse HEAD)
client_id=$(pulumi stack output @CLIENT_ID_OUTPUT@ --stack "$STACK")
backend=$("$(command -v gpucluster || echo .venv/bin/gpucluster)" backend-url)  # what `pulumi login` takes
# Secrets reach az in files it reads itself (azure-cli expands NAME=@file), never on a command line that any local
# user can read in /proc while the command runs; printf is the shell's own, so no process carries them either.
secrets=$(mktemp -d)
trap 'rm -rf "$secrets"' EXIT
(
  umask 077
  printf '%s' "$(git remote get-url origin)" > "$secrets/repository"
  printf '%s' "${PULUMI_ACCESS_TOKEN:-}" > "$secrets/token"
  printf '%s' "${PULUMI_CONFIG_PASSPHRASE:-}" > "$secrets/passphrase"
)
# A name of its own per run: a Run Command re-created with the same name and parameters may not run again.
name="@RUN_COMMAND_NAME@-$action-$(date -u +%Y%m%dT%H%M%SZ)-${ref:0:12}"
az vm run-command create --resource-group "$RESOURCE_GROUP" --vm-name "$VM" --name "$name" \
  --async-execution true --timeout-in-seconds "$TIMEOUT" --script "@$here/step2.sh" --output none \
  --parameters "STACK=$STACK" "POLICY_CONFIG=$POLICY_CONFIG" "REF=$ref" "CLIENT_ID=$client_id" "BACKEND_URL=$backend" \
  "ACTION=$action" \
  --protected-parameters "REPOSITORY=@$secrets/repository" "PULUMI_ACCESS_TOKEN=@$secrets/token" \
  "PULUMI_CONFIG_PASSPHRASE=@$secrets/passphrase"
rm -rf "$secrets"
echo "step 2 runs on $VM as Run Command $name; following it every ${POLL}s (Ctrl-C stops following, not the run;"
echo "  to look again: az vm run-command show -g $RESOURCE_GROUP --vm-name $VM --name $name --instance-view)"
while :; do
  view=$(az vm run-command show --resource-group "$RESOURCE_GROUP" --vm-name "$VM" --name "$name" --instance-view \
         --output json)
  state=$(printf '%s' "$view" | python3 -c '
import json, sys
found = json.load(sys.stdin)
view = found.get("instanceView") or (found.get("properties") or {}).get("instanceView") or {}
code = view.get("exitCode")
print(view.get("executionState") or "Unknown", code if isinstance(code, int) else "")
if view.get("executionState") in ("Succeeded", "Failed", "TimedOut", "Canceled"):
    for key in ("output", "error"):
        text = (view.get(key) or "").rstrip()
        if text:
            print(f"--- {key} (its last 4 KB; the whole log is @LOG_FILE@ on the runner)", file=sys.stderr)
            print(text, file=sys.stderr)
')
  read -r execution code <<< "$state"
  case "$execution" in
    Succeeded|Failed|TimedOut|Canceled)
      echo "step 2 ended: $execution${code:+, exit code $code}"
      [ "$execution" = Succeeded ] && exit "${code:-0}"
      exit "${code:-1}" ;;
  esac
  sleep "$POLL"
done
""".replace("@CLIENT_ID_OUTPUT@", CLIENT_ID_OUTPUT).replace("@LOG_FILE@", LOG_FILE).replace(
    "@RUN_COMMAND_NAME@", RUN_COMMAND_NAME)


def start_script(runner: DeployRunnerPlan, resource_group: str, stack: str, policy_config: str) -> str:
    """The start script with the plan's values: the runner, its group, the stack and its pack config (as the shell at
    the project's root sees it; "" for the pack's defaults), the run's timeout and the poll interval."""
    values = {"RESOURCE_GROUP": resource_group, "VM": runner.vm_name, "STACK": stack, "POLICY_CONFIG": policy_config,
              "TIMEOUT": str(runner.run_timeout_seconds), "POLL": str(POLL_SECONDS)}
    return START_SCRIPT.replace("@VALUES@", "\n".join(f"{k}={shlex.quote(v)}" for k, v in values.items()))


def step2_command(out_dir: str) -> str:
    """What the plan prints for step 2: the start script, run from the project's root."""
    return f"bash {shlex.quote(f'{out_dir}/{START_FILE}')}"
