"""A pool in the program's own network: a gpucluster cluster, a VNet of the program's own peered with the cluster's,
and a CPU pool planned on its own (`plan_pool`) in a subnet of that VNet, joining the cluster with the facts the
cluster publishes (`GpuCluster.node_join`: ClusterMetadata and the registry), as a pulumi-eks node group joins a
cluster from its `ClusterMetadata`.

NodePool checks that the pool fits the subnet (`subnet_cidr`) with the cluster's own address arithmetic; the scale
sets go in the cluster's resource group (where its autoscaler looks) and carry its pull identity. The cluster's
in-cluster layer does not know the pool (no Kueue flavor, health checks or rollout waves), so `pool_join` refuses a GPU
pool: those belong in the cluster's spec. tests/test_own_pool_example.py runs it under Pulumi's mocks;
docs/architecture.md, "A pool in your own network".
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
    NodeAccess,
    NodePool,
    NodePoolArgs,
    PoolKind,
    PoolSpec,
    SpecError,
    naming_subscription,
    plan_checked,
    plan_pool,
    pool_join,
    with_registry_name,
)

LOCATION, ZONES = "eastus2", ["1", "2", "3"]
OWN_SPACE, OWN_SUBNET = IPv4Network("10.90.0.0/16"), IPv4Network("10.90.0.0/22")
ADMIN_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl ops@example"

spec = ClusterSpec(
    name="research", location=LOCATION, zones=ZONES, kubernetes_version="1.36.4",
    network=NetworkSpec(address_space=[IPv4Network("10.80.0.0/16")]),
    pools=[PoolSpec(name="system", kind=PoolKind.SYSTEM, vm_size="Standard_D4s_v5", count=3),
           PoolSpec(name="cpu", kind=PoolKind.CPU, vm_size="Standard_D16ds_v5", count=6, pods_per_node=30),
           PoolSpec(name="h100", kind=PoolKind.GPU, vm_size="Standard_ND96isr_H100_v5", count=16, pods_per_node=16)],
    control_plane=ControlPlaneSpec(api_servers=ApiServerSpec(count=3), etcd=EtcdSpec(members=3), events_etcd=None),
    metrics=MetricsSpec(alerts=AlertsSpec(arm_roles=["Owner"])),
)
own = PoolSpec(name="cpu-own", kind=PoolKind.CPU, vm_size="Standard_D16ds_v5", count=6, pods_per_node=30)

try:
    subscription, _ = naming_subscription({SUBSCRIPTION_CONFIG: pulumi.Config("azure-native").get("subscriptionId")})
    plan = plan_checked(with_registry_name(spec, subscription))
    own_plan = plan_pool(own, LOCATION, ZONES)
except SpecError as error:
    raise pulumi.RunError("the example does not plan:\n" + "\n".join(map(str, error.problems))) from None

cluster = GpuCluster("research", GpuClusterArgs(plan=plan))

# The program's own network, peered both ways with the cluster's (the nodes reach the API servers' load balancer and
# the registry's private endpoint through it).
group = azure.resources.ResourceGroup("own-network", location=LOCATION)
vnet = azure.network.VirtualNetwork("own", resource_group_name=group.name, location=LOCATION,
                                    address_space=azure.network.AddressSpaceArgs(address_prefixes=[str(OWN_SPACE)]))
subnet = azure.network.Subnet("cpu-own", resource_group_name=group.name, virtual_network_name=vnet.name,
                              address_prefix=str(OWN_SUBNET))
azure.network.VirtualNetworkPeering("own-to-cluster", resource_group_name=group.name, virtual_network_name=vnet.name,
                                    remote_virtual_network=azure.network.SubResourceArgs(id=cluster.vnet_id),
                                    allow_virtual_network_access=True)
azure.network.VirtualNetworkPeering("cluster-to-own", resource_group_name=cluster.scope.resource_group_name,
                                    virtual_network_name=cluster.vnet_id.apply(lambda i: i.rsplit("/", 1)[-1]),
                                    remote_virtual_network=azure.network.SubResourceArgs(id=vnet.id),
                                    allow_virtual_network_access=True)

# The pool: planned on its own, joining with what the cluster publishes, booting the cluster's own CPU image.
join = pool_join(cluster.node_join.cluster, cluster.node_join.registry, own_plan, LOCATION, plan.images.pools["cpu"])
pool = NodePool("cpu-own", NodePoolArgs(
    scope=cluster.scope, plan=own_plan, subnet_id=subnet.id, subnet_cidr=OWN_SUBNET, join=join,
    access=NodeAccess("azureuser", [ADMIN_KEY]), images=cluster.node_images.ids,
    identity_ids=(cluster.pull_identity_id,)), pulumi.ResourceOptions(depends_on=[cluster]))

pulumi.export("ownScaleSetIds", [s.id for s in pool.scale_sets])
