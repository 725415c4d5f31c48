"""Managed identities for in-cluster add-ons that call Azure, each scoped to the cluster's resource group.

They are attached to the system pool's scale sets, where the add-ons run, and reached through IMDS.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_azure_native as azure

from gpucluster.azure.scope import AzureScope
from gpucluster.catalog.addon_permissions import ADDON_PERMISSIONS, Scope, actions, addons_for
from gpucluster.catalog.azure_roles import role_definition_id
from gpucluster.planning import azure_names as names


@dataclass(frozen=True)
class AddonAzureRefs:
    """What the add-ons need to reach Azure: identities' client ids and where the cluster lives."""

    subscription_id: pulumi.Output[str]
    tenant_id: pulumi.Output[str]
    resource_group: pulumi.Input[str]
    autoscaler_client_id: pulumi.Output[str]
    cni_client_id: pulumi.Output[str] | None
    """Cilium's Azure IPAM identity; None when Cilium runs `ipam: crd` (/28 blocks)."""
    prefix_ipam_client_id: pulumi.Output[str] | None = None
    """The prefix IPAM controller's identity; None with secondary IPs."""
    node_lifecycle_client_id: pulumi.Output[str] | None = None
    """cloud-node-lifecycle's identity (reads scale sets and their VMs)."""
    rollout_client_id: pulumi.Output[str] | None = None
    """The rollout controller's identity (re-images scale sets, reads their instance view)."""

    def settings(self, client_id: pulumi.Output[str]) -> dict[str, Any]:
        """What an add-on's config needs to act as one identity: the shape the object builders take."""
        return {"subscription_id": self.subscription_id, "tenant_id": self.tenant_id,
                "resource_group": self.resource_group, "client_id": client_id}


@dataclass(frozen=True)
class AddonIdentitiesArgs:
    """The inputs of AddonIdentities."""

    scope: AzureScope
    """Where the identities go; their roles are defined and assigned in this subscription and resource group."""
    gallery_id: pulumi.Input[str]
    """The cluster's Compute Gallery: a write to a scale set is checked for read on the image it boots."""
    existing_vnet_id: str | None = None
    """`network.existingVnet.id`: the subnet reads and joins are granted on that VNet (its own resource group holds
    their role). Without it the cluster's VNet is in its resource group, and the resource-group role holds them."""
    prefix_mode: bool = False
    """Pools take /28 blocks on the NIC (`podAddresses: prefixes`): the prefix IPAM controller gets an identity and
    Cilium none (components/catalog/addon_permissions.py `addons_for`)."""


def _held_at(scope_kind: Scope, existing_vnet: bool) -> tuple[Scope, ...]:
    """The permission scopes one role holds: the subnet grants go in the resource group's role unless the subnets
    are in an existing VNet, which gets a role of its own."""
    if scope_kind == "resourceGroup" and not existing_vnet:
        return ("resourceGroup", "network")
    return (scope_kind,)


def _assignable(scope_kind: Scope, scope: pulumi.Output[str]) -> pulumi.Output[str]:
    """Where a role is defined and may be assigned. The VNet's role is defined on the VNet's resource group and
    assigned on the VNet alone, as Azure advises ("create your custom roles with AssignableScopes of management
    group, subscription, or resource group, but assign the custom roles with narrow scope, such as resource":
    MicrosoftDocs/azure-docs articles/role-based-access-control/role-definitions.md, AssignableScopes)."""
    if scope_kind != "network":
        return scope
    return scope.apply(lambda vnet: vnet[:vnet.lower().index("/providers/")])


class AddonIdentities(pulumi.ComponentResource):
    """One identity per add-on, each holding a custom role with exactly the actions its software calls
    (components/catalog/addon_permissions.py), assigned at the narrowest scope the call needs."""

    identity_ids: list[pulumi.Output[str]]
    """The identities' resource ids, attached to the system pool's scale sets."""
    refs: AddonAzureRefs
    """What the add-ons' configs need: the subscription, tenant, resource group and each identity's client id."""

    def __init__(self, name: str, args: AddonIdentitiesArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpucluster:azure:AddonIdentities", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        where = args.scope
        cluster, resource_group_name, location, tags = where.cluster, where.resource_group_name, where.location, \
            dict(where.tags)
        gallery_id, prefix_mode = args.gallery_id, args.prefix_mode
        subscription_id = pulumi.Output.from_input(where.subscription_id)
        rg_name = names.resource_group_name(cluster)
        scopes: dict[Scope, pulumi.Output[str]] = {
            "resourceGroup": pulumi.Output.concat("/subscriptions/", subscription_id, "/resourceGroups/",
                                                  resource_group_name),
            "subscription": pulumi.Output.concat("/subscriptions/", subscription_id),
            # The node images every scale set boots: a write to a scale set is checked for read on its image.
            "gallery": pulumi.Output.from_input(gallery_id),
        }
        if args.existing_vnet_id:
            scopes["network"] = pulumi.Output.from_input(args.existing_vnet_id)
        identities = {}
        for addon in addons_for(prefix_mode):
            permissions = ADDON_PERMISSIONS[addon]
            identity = azure.managedidentity.UserAssignedIdentity(
                f"{name}-{addon}", resource_group_name=resource_group_name, location=location, tags=tags,
                opts=child)
            for scope_kind, scope in scopes.items():
                granted = sorted({action for kind in _held_at(scope_kind, "network" in scopes)
                                  for action in actions(permissions, kind)})
                if not granted:
                    continue
                key = f"{addon}-{scope_kind}"

                def guid(sub: str, key: str = key) -> str:
                    return names.deterministic_guid(sub, rg_name, key)

                role_guid = subscription_id.apply(guid)
                definition = azure.authorization.RoleDefinition(
                    f"{name}-{key}-role", scope=_assignable(scope_kind, scope), role_definition_id=role_guid,
                    # Custom role names are unique per tenant: the stack's hash keeps two clusters apart.
                    role_name=subscription_id.apply(
                        lambda sub, key=key: f"gpucluster-{cluster}-{key}-{names.stack_hash(sub, rg_name)}"),
                    description=f"What {addon} calls on Azure in cluster {cluster} (least privilege)",
                    role_type="CustomRole", permissions=[azure.authorization.PermissionArgs(actions=granted)],
                    assignable_scopes=[_assignable(scope_kind, scope)], opts=child)
                azure.authorization.RoleAssignment(
                    f"{name}-{addon}-role" if scope_kind == "resourceGroup" else f"{name}-{key}-role-assignment",
                    principal_id=identity.principal_id, principal_type="ServicePrincipal",
                    role_definition_id=pulumi.Output.all(subscription_id, role_guid).apply(
                        lambda ids: role_definition_id(ids[0], ids[1])),
                    scope=scope, opts=pulumi.ResourceOptions(parent=self, depends_on=[definition]))
            identities[addon] = identity
        self.identity_ids = [i.id for i in identities.values()]
        self.refs = AddonAzureRefs(subscription_id=subscription_id, tenant_id=pulumi.Output.from_input(where.tenant_id),
                                   resource_group=resource_group_name,
                                   autoscaler_client_id=identities["autoscaler"].client_id,
                                   cni_client_id=identities["cni"].client_id if "cni" in identities else None,
                                   prefix_ipam_client_id=identities["prefix-ipam"].client_id
                                   if "prefix-ipam" in identities else None,
                                   node_lifecycle_client_id=identities["node-lifecycle"].client_id,
                                   rollout_client_id=identities["rollout"].client_id)
        self.register_outputs({"identityIds": self.identity_ids})
