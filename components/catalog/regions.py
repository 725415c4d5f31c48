"""Azure regions with availability zones. Source: azure-docs
articles/reliability/availability-zones-region-support.md. A stack in a region missing here declares
its zones under `cluster.limits.regionZones`."""

from __future__ import annotations

_THREE = ("1", "2", "3")

REGION_ZONES: dict[str, tuple[str, ...]] = {
    region: _THREE
    for region in (
        "australiaeast", "brazilsouth", "canadacentral", "centralindia", "centralus", "eastasia",
        "eastus", "eastus2", "francecentral", "germanywestcentral", "italynorth", "japaneast",
        "koreacentral", "northeurope", "norwayeast", "polandcentral", "qatarcentral",
        "southafricanorth", "southcentralus", "southeastasia", "swedencentral",
        "switzerlandnorth", "uaenorth", "uksouth", "westeurope", "westus2", "westus3",
    )
}
