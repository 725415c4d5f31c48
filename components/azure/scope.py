"""AzureScope: where a component's Azure resources go, the one value every Azure component takes for it.

The cluster's name, its resource group, region, tags and the subscription and tenant the deployment signs in to, as
Cluster API Provider Azure hands every service one ClusterDescriber (kubernetes-sigs/cluster-api-provider-azure
74a8a2b9 azure/interfaces.go: ResourceGroup, ClusterName, Location, AdditionalTags; SubscriptionID and TenantID
through its Authorizer) instead of each asking on its own. GpuCluster builds it once, after the Network has created
the resource group (`AzureScope.of`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import pulumi
import pulumi_azure_native as azure

from gpucluster.planning.tags import base_tags


@dataclass(frozen=True)
class AzureScope:
    """Where a component's Azure resources go."""

    cluster: str
    """The cluster's name (the stack file's `name`): names, tags and role names derive from it."""
    resource_group_name: pulumi.Input[str]
    """The cluster's resource group (created by Network, `<cluster>-rg`)."""
    location: str
    """The Azure region every regional resource is created in (the stack file's `location`)."""
    tags: Mapping[str, str]
    """Tags on every taggable resource: the stack file's `tags` and the cluster tag (components/planning/tags.py)."""
    subscription_id: pulumi.Input[str]
    """The subscription the deployment signs in to (azure-native's client config)."""
    tenant_id: pulumi.Input[str]
    """The Entra tenant of that sign-in: workload identities and node pull identities authenticate there."""

    @staticmethod
    def of(cluster: str, resource_group_name: pulumi.Input[str], location: str,
           extra_tags: Mapping[str, str]) -> AzureScope:
        """The scope of a cluster whose resource group exists, signed in as azure-native's provider is."""
        client = azure.authorization.get_client_config_output()
        return AzureScope(cluster=cluster, resource_group_name=resource_group_name, location=location,
                          tags=base_tags(cluster, dict(extra_tags)), subscription_id=client.subscription_id,
                          tenant_id=client.tenant_id)

    @property
    def cluster_tags(self) -> dict[str, str]:
        """The cluster tag alone, without the stack's own tags (what a disk key and interconnect groups carry)."""
        return base_tags(self.cluster, {})
