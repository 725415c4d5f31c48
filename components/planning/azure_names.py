"""Names the library sets explicitly where Azure requires global uniqueness or the provider's autoname breaks a rule.

Storage account and Key Vault names are global across Azure (a DNS label under `blob.core.windows.net` and
`vault.azure.net`). azure-native would autoname them as the logical name + 8 random hex characters
(pulumi-azure-native `provider/pkg/provider/provider.go`, `getDefaultName`), which is too long and, for storage,
holds hyphens. So the library names them itself: a readable prefix from the cluster, plus a hash of the
subscription and resource group. The same stack in the same subscription always gets the same name (no change
between runs, nothing random in state); another subscription or resource group gets another name.

Rules (Microsoft Learn, "Naming rules and restrictions for Azure resources",
azure-docs articles/azure-resource-manager/management/resource-name-rules.md):
- Microsoft.Storage/storageAccounts: 3-24, lowercase letters and numbers, globally unique.
- Microsoft.KeyVault/vaults: 3-24, alphanumerics and hyphens, start with a letter, end with a letter or digit,
  no consecutive hyphens, globally unique.
- Microsoft.ContainerRegistry/registries: 5-50, alphanumerics, globally unique (the login server
  `<name>.azurecr.io` is a DNS name; Azure keeps the name's case but the login server is lowercase).

The registry's name is needed before anything is deployed (every image reference names its login server), so it is
made where the stack is read: components/spec/resource_names.py and registry_name.py.
"""

from __future__ import annotations

import re
import uuid

from gpucluster.spec.resource_names import SUFFIX_CHARS, container_registry_name, resource_group_name, stack_hash

__all__ = ["container_registry_name", "deterministic_guid", "key_vault_name", "resource_group_name",
           "stack_hash", "storage_account_name"]

STORAGE_ACCOUNT_MAX = 24
KEY_VAULT_MAX = 24


def storage_account_name(subscription: str, resource_group: str, cluster: str, purpose: str) -> str:
    """`<cluster><purpose>` in lowercase letters and digits, cut to fit, + 8 hex of subscription/group/purpose."""
    prefix = re.sub(r"[^a-z0-9]", "", f"{cluster}{purpose}".lower())[: STORAGE_ACCOUNT_MAX - SUFFIX_CHARS]
    if not prefix or not prefix[0].isalpha():
        prefix = ("s" + prefix)[: STORAGE_ACCOUNT_MAX - SUFFIX_CHARS]
    return prefix + stack_hash(subscription, resource_group, "storage", purpose)


def key_vault_name(subscription: str, resource_group: str, cluster: str, purpose: str) -> str:
    """`<cluster>-<purpose>` cut to fit, + `-` + 8 hex: starts with a letter, no `--`, at most 24 characters."""
    room = KEY_VAULT_MAX - SUFFIX_CHARS - 1
    prefix = re.sub(r"-+", "-", re.sub(r"[^a-zA-Z0-9-]", "", f"{cluster}-{purpose}"))[:room].strip("-")
    if not prefix or not prefix[0].isalpha():
        prefix = ("kv" + prefix)[:room].strip("-")
    return f"{prefix}-{stack_hash(subscription, resource_group, 'keyvault', purpose)}"


def deterministic_guid(*parts: str) -> str:
    """A GUID for names Azure wants as GUIDs (role definitions): the same for the same parts."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, "gpucluster:" + "/".join(parts)))
