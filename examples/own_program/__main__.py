"""A Pulumi program of its own that uses gpucluster as a library: the cluster's spec built in Python (no stack file),
planned and checked, declared as one GpuCluster, a resource of the program's own placed where the cluster's go, and
the outputs the cluster publishes exported.

docs/architecture.md, "Using GpuCluster from a program", walks through it; tests/test_example_program.py runs it under
Pulumi's mocks, and tests/test_import_name.py runs it from a regular install beside a `components/` folder of the
program's own. With the library installed in the program's virtualenv (`pip install <gpucluster checkout>`), `pulumi
up` runs it; the import name is `gpucluster`, whatever the program's own folders are called.
"""

from ipaddress import IPv4Network

import pulumi
import pulumi_azure_native as azure

from gpucluster import (
    SUBSCRIPTION_CONFIG,
    AlertsSpec,
    ApiServerSpec,
    ClusterSpec,
    ControlPlaneSpec,
    EtcdSpec,
    GpuCluster,
    GpuClusterArgs,
    MetricsSpec,
    NetworkSpec,
    PoolKind,
    PoolSpec,
    SpecError,
    naming_subscription,
    plan_checked,
    with_registry_name,
)

spec = ClusterSpec(
    name="research",
    location="eastus2",
    zones=["1", "2", "3"],
    kubernetes_version="1.36.4",
    network=NetworkSpec(address_space=[IPv4Network("10.80.0.0/16")]),
    pools=[
        PoolSpec(name="system", kind=PoolKind.SYSTEM, vm_size="Standard_D4s_v5", count=3),
        PoolSpec(name="h100", kind=PoolKind.GPU, vm_size="Standard_ND96isr_H100_v5", count=16, pods_per_node=16),
    ],
    control_plane=ControlPlaneSpec(api_servers=ApiServerSpec(count=3), etcd=EtcdSpec(members=3), events_etcd=None),
    # Where its alerts go: the subscription's owners, by e-mail (docs/metrics.md, "Alert delivery").
    metrics=MetricsSpec(alerts=AlertsSpec(arm_roles=["Owner"])),
)

try:
    # The registry's name is global across Azure: by default it hashes the subscription the stack deploys to
    # (azure-native:subscriptionId, else AZURE_SUBSCRIPTION_ID). Then the planners and the first-boot check: a
    # CheckedPlan is the only plan GpuCluster takes.
    subscription, _ = naming_subscription({SUBSCRIPTION_CONFIG: pulumi.Config("azure-native").get("subscriptionId")})
    plan = plan_checked(with_registry_name(spec, subscription))
except SpecError as error:
    raise pulumi.RunError("the research cluster does not plan:\n" + "\n".join(map(str, error.problems))) from None

cluster = GpuCluster("research", GpuClusterArgs(plan=plan))

# The program's own resource, where the cluster's go: the cluster's AzureScope (resource group, region, tags).
trainer = azure.managedidentity.UserAssignedIdentity(
    "trainer", resource_group_name=cluster.scope.resource_group_name, location=cluster.scope.location,
    tags=dict(cluster.scope.tags))

pulumi.export("apiServerEndpoint", cluster.api_server_endpoint)
pulumi.export("caCertHash", cluster.ca_cert_hash)
pulumi.export("kubeconfig", cluster.admin_kubeconfig)
pulumi.export("scaleSetIds", cluster.scale_set_ids)
pulumi.export("registry", cluster.registry_login_server)
pulumi.export("trainerClientId", trainer.client_id)
