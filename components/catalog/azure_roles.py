"""Built-in Azure role definitions the library assigns (ids are the same in every tenant)."""

from __future__ import annotations

STORAGE_BLOB_DATA_CONTRIBUTOR = "ba92f5b4-2d11-453d-a403-e96b0029c9fe"
KEY_VAULT_CRYPTO_SERVICE_ENCRYPTION_USER = "e147488a-f6f5-4113-8e2d-b22465e65bf6"
"""Lets a disk encryption set wrap and unwrap with the key."""
KEY_VAULT_CRYPTO_SERVICE_RELEASE_USER = "08bbd89e-9f13-488c-ac41-acfcb10c90ab"
"""Lets the Confidential VM Orchestrator release an exportable key to an attested CVM."""

# The add-ons' identities get custom roles built from what they call: components/catalog/addon_permissions.py.


def role_definition_id(subscription: str, role: str) -> str:
    return f"/subscriptions/{subscription}/providers/Microsoft.Authorization/roleDefinitions/{role}"
ACR_PULL = "7f951dda-4ed3-4680-a7ca-43fe172d538d"
"""AcrPull: pull from a registry (container-registry-rbac-built-in-roles-overview.md)."""
MONITORING_READER = "43d0d8ad-25c7-4714-9337-8ba259a9fe05"
"""Monitoring Reader: `*/read` (azure-docs articles/role-based-access-control/built-in-roles/monitor.md)."""
KEY_VAULT_SECRETS_USER = "4633458b-17de-408a-b874-0445c86b69e6"
"""Read secret contents on an RBAC-authorized vault: what an ACR credential set's identity needs."""
