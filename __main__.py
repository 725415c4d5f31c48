"""The Pulumi program: load the stack's spec, plan it, declare the cluster, export the plans."""

import pulumi

from components.cluster import GpuCluster, plan_outputs
from components.errors import SpecError
from components.simulation.check import plan_checked
from components.spec import parse_cluster

try:
    plan = plan_checked(parse_cluster(pulumi.Config().require_object("cluster")))
except SpecError as error:
    raise pulumi.RunError("invalid gpucluster:cluster config:\n" + "\n".join(map(str, error.problems))) from None

cluster = GpuCluster(plan.spec.name, plan)
for key, value in plan_outputs(plan).items():
    pulumi.export(key, value)
pulumi.export("vnetId", cluster.network.refs.vnet_id)
pulumi.export("caCertHash", cluster.pki.ca_cert_hash)
pulumi.export("bootstrapTokenId", cluster.bootstrap_tokens.current_id)
pulumi.export("bootstrapTokens", {
    "current": {"id": cluster.bootstrap_tokens.current_id, "expires": plan.tokens.current.expiration},
    "previous": {"id": cluster.bootstrap_tokens.previous_id, "expires": plan.tokens.previous.expiration},
    "rotates": plan.tokens.rotates.strftime("%Y-%m-%dT%H:%M:%SZ"),
})
pulumi.export("apiServerEndpoint", plan.ip.api_server_endpoint)
pulumi.export("adminKubeconfig", cluster.admin_kubeconfig)
pulumi.export("breakGlassKubeconfig", cluster.break_glass_kubeconfig)
if cluster.break_glass_key is not None:
    pulumi.export("breakGlassSshPrivateKey", pulumi.Output.secret(cluster.break_glass_key.private_key_openssh))
if cluster.deploy_runner is not None:
    # Step 2's command reads it (docs/operations.md, "First bootstrap").
    pulumi.export("deployRunnerClientId", cluster.deploy_runner.client_id)
