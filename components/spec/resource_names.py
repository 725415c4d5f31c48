"""Names that follow from the stack alone: the cluster's resource group, and the registry's default name.

The registry's name is needed before anything is deployed: every image reference in the manifests, chart values and
boot documents names its login server, and the plan renders them offline. It is global across Azure (5-50
alphanumerics; the login server `<name>.azurecr.io` is a DNS name: Microsoft Learn, "Naming rules and restrictions
for Azure resources", resource-name-rules.md), so it hashes the subscription the stack deploys to
(components/spec/registry_name.py says where that is read) with the cluster, its resource group and its region.
"""

from __future__ import annotations

import hashlib
import re

REGISTRY_MIN = 5
REGISTRY_MAX = 50
SUFFIX_CHARS = 8


def resource_group_name(cluster: str) -> str:
    return f"gpucluster-{cluster}"


def stack_hash(*parts: str, chars: int = SUFFIX_CHARS) -> str:
    """Lowercase hex digest of the parts: stable for the same stack, different for another."""
    return hashlib.sha256("/".join(parts).encode()).hexdigest()[:chars]


def container_registry_name(cluster: str, location: str, subscription: str) -> str:
    """`<cluster>` in lowercase letters and digits + `acr` + 8 hex of subscription/cluster/group/region: 5-50
    alphanumerics, another for each subscription."""
    prefix = re.sub(r"[^a-z0-9]", "", cluster.lower())[: REGISTRY_MAX - SUFFIX_CHARS - 3]
    return f"{prefix}acr{stack_hash(subscription.lower(), cluster, resource_group_name(cluster), location, 'registry')}"
