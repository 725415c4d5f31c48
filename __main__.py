"""The Pulumi program: load the stack's spec, plan it, refuse what `gpucluster plan` refuses, declare the cluster,
export what it publishes."""

import pulumi

from components.catalog.deploy_runner import PULUMI_CLI_VERSION
from components.cluster import GpuCluster, GpuClusterArgs
from components.errors import SpecError
from components.offline.program_check import check_in_child, engine_config, require_cli, under_real_engine
from components.simulation.check import plan_checked
from components.spec import parse_cluster

try:
    plan = plan_checked(parse_cluster(pulumi.Config().require_object("cluster")))
    if under_real_engine():
        require_cli(PULUMI_CLI_VERSION)
        # The checks `gpucluster plan` runs on what the program registers, in a child under mocks
        # (components/offline/program_check.py); under `gpucluster plan` or a test's mocks they run there already.
        check_in_child(pulumi.get_project(), pulumi.get_stack(), engine_config(pulumi.get_project()))
except SpecError as error:
    raise pulumi.RunError("gpucluster refuses this stack:\n" + "\n".join(map(str, error.problems))) from None

cluster = GpuCluster(plan.spec.name, GpuClusterArgs(plan=plan))
for key, value in cluster.stack_outputs().items():
    pulumi.export(key, value)
