"""ConfidentialDiskKey: a customer-managed key for confidential OS disks.

Key Vault Premium (HSM-backed keys), an exportable RSA-HSM key whose release policy admits only an
attested, Azure-compliant SEV-SNP confidential VM, and a disk encryption set of type
ConfidentialVmEncryptedWithCustomerKey. The disk encryption set may use the key; the Confidential
VM Orchestrator may release it. Nobody else gets a role on the vault.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_azure_native as azure

from gpucluster.azure.scope import AzureScope
from gpucluster.catalog.azure_roles import (
    KEY_VAULT_CRYPTO_SERVICE_ENCRYPTION_USER,
    KEY_VAULT_CRYPTO_SERVICE_RELEASE_USER,
    role_definition_id,
)
from gpucluster.planning import azure_names as names
from gpucluster.planning.azure_names import key_vault_name
from gpucluster.planning.confidential import DISK_ENCRYPTION_SET_TYPE, KEY_SIZE, KEY_TYPE, CustomerKeyPlan


@dataclass(frozen=True)
class ConfidentialDiskKeyArgs:
    """The inputs of ConfidentialDiskKey."""

    scope: AzureScope
    """Where the vault, key and disk encryption set go; the vault trusts the scope's tenant."""
    plan: CustomerKeyPlan
    """The key's release policy and the Confidential VM Orchestrator's object id (a pool's `confidential`)."""
    pool: str
    """The confidential pool the key encrypts: the vault's name derives from it."""


class ConfidentialDiskKey(pulumi.ComponentResource):
    """A confidential pool's customer-managed OS-disk key and the disk encryption set that uses it."""

    disk_encryption_set: azure.compute.DiskEncryptionSet
    """The set the pool's OS disks name (ConfidentialVmEncryptedWithCustomerKey)."""

    def __init__(self, name: str, args: ConfidentialDiskKeyArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpucluster:azure:ConfidentialDiskKey", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        where, plan, pool = args.scope, args.plan, args.pool
        cluster, resource_group_name, location, tags = where.cluster, where.resource_group_name, where.location, \
            dict(where.tags)
        subscription_id = pulumi.Output.from_input(where.subscription_id)
        # Losing the key loses the disks: purge protection on, and Pulumi will not delete the vault or key.
        kept = pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(protect=True))
        # Vault names are global, 3-24 characters: named from the stack, never autonamed (name + 8 hex is too long).
        vault_name = subscription_id.apply(
            lambda sub: key_vault_name(sub, names.resource_group_name(cluster), cluster, f"{pool}-cmk"))
        self.vault = azure.keyvault.Vault(
            f"{name}-kv", vault_name=vault_name, resource_group_name=resource_group_name, location=location, tags=tags,
            properties=azure.keyvault.VaultPropertiesArgs(
                tenant_id=where.tenant_id,
                sku=azure.keyvault.SkuArgs(family="A", name=azure.keyvault.SkuName.PREMIUM),
                enable_rbac_authorization=True, enable_purge_protection=True, enable_soft_delete=True,
                soft_delete_retention_in_days=90, enabled_for_disk_encryption=True),
            opts=kept)
        self.key = azure.keyvault.Key(
            f"{name}-key", resource_group_name=resource_group_name, vault_name=self.vault.name,
            properties=azure.keyvault.KeyPropertiesArgs(
                kty=KEY_TYPE, key_size=KEY_SIZE,
                key_ops=["wrapKey", "unwrapKey"],
                attributes=azure.keyvault.KeyAttributesArgs(enabled=True, exportable=True),
                release_policy=azure.keyvault.KeyReleasePolicyArgs(data=plan.release_policy_data())),
            opts=kept)
        self.disk_encryption_set = azure.compute.DiskEncryptionSet(
            f"{name}-des", resource_group_name=resource_group_name, location=location, tags=tags,
            encryption_type=DISK_ENCRYPTION_SET_TYPE,
            identity=azure.compute.EncryptionSetIdentityArgs(type="SystemAssigned"),
            active_key=azure.compute.KeyForDiskEncryptionSetArgs(
                key_url=self.key.key_uri_with_version,
                source_vault=azure.compute.SourceVaultArgs(id=self.vault.id)),
            opts=child)
        principal = self.disk_encryption_set.identity.apply(lambda i: i.principal_id if i else "")
        azure.authorization.RoleAssignment(
            f"{name}-des-key-user", principal_id=principal, principal_type="ServicePrincipal",
            role_definition_id=subscription_id.apply(
                lambda sub: role_definition_id(sub, KEY_VAULT_CRYPTO_SERVICE_ENCRYPTION_USER)),
            scope=self.vault.id, opts=child)
        azure.authorization.RoleAssignment(
            f"{name}-cvm-orchestrator-release", principal_id=plan.orchestrator_object_id,
            principal_type="ServicePrincipal",
            role_definition_id=subscription_id.apply(
                lambda sub: role_definition_id(sub, KEY_VAULT_CRYPTO_SERVICE_RELEASE_USER)),
            scope=self.vault.id, opts=child)
        self.register_outputs({"diskEncryptionSetId": self.disk_encryption_set.id})
