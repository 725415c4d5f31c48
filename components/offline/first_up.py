"""Which run of `pulumi up` creates what on a first deployment, and from where it must run.

The API servers' load balancer has one private frontend and the registry has public access disabled, so a
workstation or a hosted CI runner reaches only ARM. The first `up` therefore runs in two steps:

1. From anywhere with ARM access: `pulumi up --exclude '<FIRST_EXCLUDE>' --exclude-dependents` creates everything
   that needs only ARM: the network, the gallery and its Image Builder builds, the registry with its cache rules and
   the agents image (built server-side by ACR Tasks on the agent pool in the VNet), the PKI, etcd and the API
   servers. It leaves out the join access (the bootstrap tokens, cluster-info and kubeadm's RBAC, applied through
   the API server) and, as its dependents, the node scale sets and the in-cluster layer.
2. From a machine that reaches the API servers' internal load balancer (`cluster.inCluster.apiAccess`: in the VNet,
   a peered network, or a proxy through a jump host): a plain `pulumi up`, which creates the rest. Every later
   update runs from there too, as the Kubernetes provider reads the cluster on each preview. With the deployment
   runner (`cluster.deployRunner`, on by default for `vnet`), step 1 creates that machine in the VNet and step 2 is
   one `az vm run-command create` from anywhere with ARM access, which runs the plan's script there
   (components/planning/runner_step2.py).

The exclusion follows the Pulumi engine (pulumi/pulumi commit 1b5949891b3c): a URN glob's `**` matches anything and
`*` anything but `:` (pkg/resource/deploy/deployment.go, UrnTargets.getMatcher), and with `--exclude-dependents` a
resource is left out when its provider, its parent or any dependency is (pkg/resource/deploy/step_generator.go,
isExcludedFromUpdate; pkg/resource/state.go, GetAllDependencies), in registration order. This module applies the
same rules to the resources the offline engine records, so the plan shows each step's resources.
"""

from __future__ import annotations

import re
import urllib.parse
from collections import Counter
from pathlib import Path
from typing import Any

from gpucluster.bootstrap.deploy_runner import render_runner_cloud_init
from gpucluster.offline.engine import Registration
from gpucluster.planning.azure_names import resource_group_name
from gpucluster.planning.cluster_plan import ClusterPlan
from gpucluster.planning.deploy_runner import plan_deploy_runner
from gpucluster.planning.runner_step2 import LOG_FILE, SCRIPT_FILE, START_FILE, STEP2_SCRIPT, start_script, step2_command
from gpucluster.spec import ClusterSpec

FIRST_EXCLUDE = "**:kubernetes:JoinAccess**"
"""Every resource under the join access component, its own URN included (its type is in each child's URN)."""
RUNNER_BOOT_FILE = "runner-cloud-init.yaml"
NEEDS_THE_API = ("kubernetes:", "pulumi:providers:kubernetes")
"""Resources the Kubernetes provider applies: they need the API server."""


def urn_glob(glob: str) -> re.Pattern[str]:
    """UrnTargets.getMatcher: split at `**` (any text), then at `*` (any text without `:`), the rest quoted."""
    segments = ["[^:]*".join(re.escape(part) for part in segment.split("*")) for segment in glob.split("**")]
    return re.compile("^" + ".*".join(segments) + "$")


def excluded(registrations: list[Registration], globs: tuple[str, ...]) -> set[str]:
    """The URNs `pulumi up --exclude <globs> --exclude-dependents` leaves out."""
    patterns = [urn_glob(g) for g in globs]
    out: set[str] = set()
    for r in registrations:  # registration order is topological: what a resource depends on came before it
        provider = r.provider.rsplit("::", 1)[0] if r.provider else ""  # a reference is `<urn>::<id>`
        if any(p.match(r.urn) for p in patterns) or provider in out or r.parent in out \
                or any(d in out for d in r.dependencies):
            out.add(r.urn)
    return out


def _short(type_: str) -> str:
    return type_.split(":", 1)[-1] if type_.startswith(("azure-native:", "kubernetes:", "command:")) else type_


def without_password(url: str) -> str:
    """`url` with the password of its user info replaced by `***` (`socks5://user:***@host:1080`): what the plan's
    summary and report say of a proxy, never its secret."""
    parts = urllib.parse.urlsplit(url)
    if parts.password is None:
        return url
    host = parts.netloc.rsplit("@", 1)[1]
    return urllib.parse.urlunsplit(parts._replace(netloc=f"{parts.username}:***@{host}"))


def write_runner_files(plan: ClusterPlan, out: Path, stack: str = "", policy_config: str = "") -> None:
    """`first-up/step2.sh`, the script step 2's Run Command sends, `first-up/start-step2.sh`, which starts it and
    follows it, and the runner's boot text beside them."""
    if plan.deploy_runner is None:
        return
    folder = out / Path(SCRIPT_FILE).parent
    folder.mkdir(parents=True, exist_ok=True)
    (out / SCRIPT_FILE).write_text(STEP2_SCRIPT, encoding="utf-8")
    (out / START_FILE).write_text(start_script(plan.deploy_runner, resource_group_name(plan.spec.name),
                                               stack or plan.spec.name, policy_config), encoding="utf-8")
    (folder / RUNNER_BOOT_FILE).write_text(render_runner_cloud_init(), encoding="utf-8")


def first_up(registrations: list[Registration], spec: ClusterSpec, policy_args: str, stack: str = "",
             policy_config: str = "") -> dict[str, Any]:
    """The two steps of a first `pulumi up`: the command, where it runs, and what it creates (custom resources).
    With the deployment runner, step 2's command is the Run Command that runs the script `make plan STACK=<stack>`
    writes (out/<stack>/first-up/step2.sh) on it, for `stack` with the pack config `policy_config` (paths as the
    user's shell at the project's root sees them; "" when the stack has none: the pack's defaults)."""
    left_out = excluded(registrations, (FIRST_EXCLUDE,))
    custom = [r for r in registrations if r.custom]
    first = [r for r in custom if r.urn not in left_out]
    second = [r for r in custom if r.urn in left_out]
    access = spec.in_cluster.api_access
    proxy = without_password(access.proxy_url or "") or "apiAccess.proxyUrl"
    where = {"vnet": "a machine in the cluster's VNet (e.g. a self-hosted CI runner in the system subnet)",
             "peered": "a machine in the network peered with the cluster's VNet (network.hubVnetId)",
             "proxy": f"anywhere, through the jump host's proxy ({proxy})"}
    second_step: dict[str, Any] = {"step": 2, "runsFrom": where[access.path], "apiAccess": access.path,
                                   "command": f"pulumi up {policy_args}".strip()}
    runner = plan_deploy_runner(spec)
    if runner is not None:
        second_step.update({
            "runsFrom": f"anywhere with ARM access: a managed Run Command runs it on the deployment runner "
                        f"{runner.vm_name} in the VNet, which step 1 creates",
            "command": step2_command(f"out/{stack or spec.name}"), "runs": second_step["command"],
            "script": SCRIPT_FILE, "start": START_FILE, "log": LOG_FILE,
            "runner": {"vmName": runner.vm_name, "vmSize": runner.size.name, "zone": runner.zone,
                       "timeoutSeconds": runner.run_timeout_seconds}})
    return {
        "steps": [
            {"step": 1, "runsFrom": "anywhere with ARM access (a workstation, a hosted CI runner)",
             "command": f"pulumi up --exclude '{FIRST_EXCLUDE}' --exclude-dependents {policy_args}".strip(),
             "resources": len(first), "byType": dict(sorted(Counter(_short(r.type) for r in first).items())),
             "needsTheApi": sorted({r.name for r in first if r.type.startswith(NEEDS_THE_API)})},
            {**second_step, "resources": len(second),
             "byType": dict(sorted(Counter(_short(r.type) for r in second).items()))},
        ],
        "laterUpdates": "step 2's command (the Run Command), from anywhere with ARM access" if runner is not None
        else f"step 2's command, from {where[access.path]}",
    }
