"""The deployment runner: a small Linux VM in the control-plane subnet, no public IP, with a user-assigned identity,
created by step 1 of the first `pulumi up` so that step 2 (and every later update) runs inside the VNet, driven from
anywhere with ARM access through a managed Run Command (docs/operations.md, "First bootstrap").

Pure. On by default where `cluster.inCluster.apiAccess.path` is `vnet` (the only way in is from inside); off where
the stack declares a way of its own (`peered`, `proxy`)."""

from __future__ import annotations

from dataclasses import dataclass

from gpucluster.catalog.deploy_runner import CONTRIBUTOR, RBAC_ADMINISTRATOR, RUNNER_IMAGE
from gpucluster.catalog.vm_sizes import VmSize
from gpucluster.errors import Problem, SpecError
from gpucluster.planning.placement import ordered_zones, zone_list
from gpucluster.planning.sizes import size_table, unknown_size_message
from gpucluster.spec import ClusterSpec, ImageRef

ALLOCATION_WAIT_SECONDS = 2 * 3600
"""How long one `up` waits for the node scale sets' allocations (components/azure/scale_sets_ready.py) before it
reports those still in progress (they go on in Azure; the next `up` waits again)."""

PATH = "cluster.deployRunner"
RUNNER_IPS = 1
"""The runner's one NIC, in the control-plane subnet (components/planning/ip_plan.py counts it)."""
OS_DISK_GIB = 64
"""The checkout, `.venv` (about 730 MB, README) and Pulumi's plugins (azure-native's is several hundred MB)."""
RUN_COMMAND_NAME = "gpucluster-step2"


@dataclass(frozen=True)
class RunnerRole:
    role: str
    """A built-in role's id (components/catalog/deploy_runner.py)."""
    why: str
    conditional: bool = False
    """Assigned with the delegation condition: no privileged role, service principals only."""


RUNNER_ROLES = (
    RunnerRole(CONTRIBUTOR, "writes the resource group's resources: step 2's node scale sets and interconnect blocks, "
               "and what a later update changes"),
    RunnerRole(RBAC_ADMINISTRATOR, "writes the role assignments a later update adds or changes in the resource group "
               "(the add-ons', the pull identity's, the etcd members'), never Owner, User Access Administrator or "
               "itself, and only to service principals", conditional=True),
)
"""Both at the cluster's resource group, the narrowest scope step 2 writes in."""


@dataclass(frozen=True)
class DeployRunnerPlan:
    vm_name: str
    size: VmSize
    zone: str
    image: ImageRef
    run_timeout_seconds: int
    roles: tuple[RunnerRole, ...] = RUNNER_ROLES


def runner_enabled(spec: ClusterSpec) -> bool:
    enabled = spec.deploy_runner.enabled
    return spec.in_cluster.api_access.path == "vnet" if enabled is None else enabled


def plan_deploy_runner(spec: ClusterSpec) -> DeployRunnerPlan | None:
    """The runner, or None where it is off. Raises SpecError with one problem per bad key."""
    runner = spec.deploy_runner
    if not runner_enabled(spec):
        return None
    problems: list[Problem] = []
    if spec.in_cluster.api_access.path == "proxy":
        problems.append(Problem(f"{PATH}.enabled", "the runner reaches the API servers from inside the VNet, but "
                                "inCluster.apiAccess.path proxy makes `pulumi up` dial through proxyUrl: set path vnet "
                                "to run step 2 on the runner, or enabled false to keep the proxy"))
    table = size_table(spec)
    size = table.get(runner.vm_size)
    if size is None:
        problems.append(Problem(f"{PATH}.vmSize", unknown_size_message(runner.vm_size, table)))
    elif size.gpus or size.infiniband or size.confidential:
        problems.append(Problem(f"{PATH}.vmSize", f"{size.name} is a GPU, InfiniBand or confidential size for a "
                                "machine that only runs `pulumi up`: pick a general-purpose one such as Standard_D4s_v5"))
    zone = runner.zone or ordered_zones(spec.zones)[0]  # not the list's order: reordering zones moves nothing
    if zone not in spec.zones:
        problems.append(Problem(f"{PATH}.zone", f"{zone!r} is not one of the cluster's zones "
                                f"({zone_list(spec.zones)}): pick one of them or remove the key"))
    # Step 2 on the runner waits for the API servers, then for every allocation: a Run Command stopped before
    # that leaves the update half-done with pending operations in the state.
    needed = ALLOCATION_WAIT_SECONDS // 60 + spec.in_cluster.api_access.ready_timeout_minutes
    if runner.run_timeout_minutes <= needed:
        problems.append(Problem(f"{PATH}.runTimeoutMinutes", f"{runner.run_timeout_minutes} minutes would stop step 2 "
                                f"inside its own waits (the API servers' readiness, "
                                f"{spec.in_cluster.api_access.ready_timeout_minutes} min, and the allocations', "
                                f"{ALLOCATION_WAIT_SECONDS // 60} min): set more than {needed}"))
    if problems or size is None:
        raise SpecError(problems)
    return DeployRunnerPlan(f"{spec.name}-deploy-runner", size, zone, RUNNER_IMAGE, runner.run_timeout_minutes * 60)
