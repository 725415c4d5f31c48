"""The Pulumi program: load the stack's spec, plan it, refuse what `gpucluster plan` refuses, declare the cluster,
export what it publishes."""

import pulumi

from gpucluster.catalog.deploy_runner import PULUMI_CLI_VERSION
from gpucluster.cluster import GpuCluster, GpuClusterArgs
from gpucluster.errors import SpecError
from gpucluster.offline.program_check import (
    check_in_child,
    engine_config,
    require_cli,
    require_subscription,
    under_real_engine,
)
from gpucluster.project import project_root
from gpucluster.simulation.check import plan_checked
from gpucluster.spec.loader import named_cluster
from gpucluster.spec.namesakes import namesake_warning
from gpucluster.spec.registry_name import SUBSCRIPTION_CONFIG, naming_subscription

try:
    raw = pulumi.Config().require_object("cluster")
    subscription = {SUBSCRIPTION_CONFIG: pulumi.Config("azure-native").get("subscriptionId")}
    plan = plan_checked(named_cluster(raw, subscription))
    if under_real_engine():
        require_cli(PULUMI_CLI_VERSION)
        if not (raw.get("registry") or {}).get("name"):
            require_subscription(*naming_subscription(subscription))
        # The checks `gpucluster plan` runs on what the program registers, in a child under mocks
        # (components/offline/program_check.py); under `gpucluster plan` or a test's mocks they run there already.
        check_in_child(pulumi.get_project(), pulumi.get_stack(), engine_config(pulumi.get_project()))
        # A copied stack file that kept the cluster's name (components/spec/namesakes.py); `plan` warns the same.
        own_file = project_root() / "stacks" / f"Pulumi.{pulumi.get_stack()}.yaml"
        if (warning := namesake_warning(own_file, plan.spec.name)) is not None:
            pulumi.log.warn(warning)
except SpecError as error:
    raise pulumi.RunError("gpucluster refuses this stack:\n" + "\n".join(map(str, error.problems))) from None

cluster = GpuCluster(plan.spec.name, GpuClusterArgs(plan=plan))
for key, value in cluster.stack_outputs().items():
    pulumi.export(key, value)
