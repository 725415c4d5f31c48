"""The Pulumi program: load the stack's spec, plan it, declare the cluster, export what it publishes."""

import pulumi

from components.cluster import GpuCluster, GpuClusterArgs
from components.errors import SpecError
from components.simulation.check import plan_checked
from components.spec import parse_cluster

try:
    plan = plan_checked(parse_cluster(pulumi.Config().require_object("cluster")))
except SpecError as error:
    raise pulumi.RunError("invalid gpucluster:cluster config:\n" + "\n".join(map(str, error.problems))) from None

cluster = GpuCluster(plan.spec.name, GpuClusterArgs(plan=plan))
for key, value in cluster.stack_outputs().items():
    pulumi.export(key, value)
