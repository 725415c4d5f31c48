"""ACR Tasks on a dedicated agent pool in the cluster's VNet: how the project's agents image is built inside the
registry's private network, with no Docker and no route into the VNet where `pulumi up` runs.

Source: MicrosoftDocs azure-management-docs articles/container-registry/tasks-agent-pools.md ("Run an ACR task on a
dedicated agent pool", as published on learn.microsoft.com): an agent pool gives "Virtual network support - Assign
an agent pool to an Azure VNet, providing access to resources in the VNet such as a container registry"; Premium
only; in preview, Linux only, in the regions below; "the default total vCPU (core) quota is 16 for all standard agent
pools" per registry. azure-native 3.29.0 declares it as `containerregistry:AgentPool` at Microsoft.ContainerRegistry
2019-06-01-preview (its only version there besides 2025-03-01-preview).
"""

from __future__ import annotations

AGENT_POOL_NAME = "agents"
AGENT_POOL_TIER = "S1"
"""The smallest standard tier (2 vCPUs): the build copies three files onto a base image, twice at most."""
AGENT_POOL_COUNT = 1

AGENT_POOL_REGIONS = frozenset({
    "westus2", "southcentralus", "eastus2", "eastus", "centralus", "westeurope", "northeurope", "canadacentral",
    "eastasia", "switzerlandnorth", "usgovarizona", "usgovtexas", "usgovvirginia"})
"""tasks-agent-pools.md, "Preview limitations": "Task agent pools are available in preview in the following regions:
West US 2, South Central US, East US 2, East US, Central US, West Europe, North Europe, Canada Central, East Asia,
Switzerland North, USGov Arizona, USGov Texas, and USGov Virginia" (as ARM location names)."""
