"""Managed identities for in-cluster add-ons that call Azure, each scoped to the cluster's resource group.

They are attached to the system pool's scale sets, where the add-ons run, and reached through IMDS.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_azure_native as azure

from components.catalog.azure_roles import NETWORK_CONTRIBUTOR, VIRTUAL_MACHINE_CONTRIBUTOR, role_definition_id


@dataclass(frozen=True)
class AddonAzureRefs:
    """What the add-ons need to reach Azure: identities' client ids and where the cluster lives."""

    subscription_id: pulumi.Output[str]
    tenant_id: pulumi.Output[str]
    resource_group: pulumi.Input[str]
    autoscaler_client_id: pulumi.Output[str]
    cni_client_id: pulumi.Output[str]

    def settings(self, client_id: pulumi.Output[str]) -> dict[str, Any]:
        """What an add-on's config needs to act as one identity: the shape the object builders take."""
        return {"subscription_id": self.subscription_id, "tenant_id": self.tenant_id,
                "resource_group": self.resource_group, "client_id": client_id}


class AddonIdentities(pulumi.ComponentResource):
    def __init__(self, name: str, resource_group_name: pulumi.Input[str], location: str, tags: dict[str, str],
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpucluster:azure:AddonIdentities", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        client = azure.authorization.get_client_config_output()
        scope = pulumi.Output.concat("/subscriptions/", client.subscription_id, "/resourceGroups/", resource_group_name)
        identities = {}
        for role_name, role in (("autoscaler", VIRTUAL_MACHINE_CONTRIBUTOR), ("cni", NETWORK_CONTRIBUTOR)):
            identity = azure.managedidentity.UserAssignedIdentity(
                f"{name}-{role_name}", resource_group_name=resource_group_name, location=location, tags=tags,
                opts=child)
            azure.authorization.RoleAssignment(
                f"{name}-{role_name}-role", principal_id=identity.principal_id, principal_type="ServicePrincipal",
                role_definition_id=client.subscription_id.apply(lambda sub, r=role: role_definition_id(sub, r)),
                scope=scope, opts=child)
            identities[role_name] = identity
        self.identity_ids = [i.id for i in identities.values()]
        self.refs = AddonAzureRefs(subscription_id=client.subscription_id, tenant_id=client.tenant_id,
                                   resource_group=resource_group_name,
                                   autoscaler_client_id=identities["autoscaler"].client_id,
                                   cni_client_id=identities["cni"].client_id)
        self.register_outputs({})
