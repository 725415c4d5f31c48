"""Shared Microsoft Azure Attestation (MAA) providers per region, for confidential key-release policies.

The shared provider of a region is `https://shared<code>.<code>.attest.azure.net`. Regions missing
here declare the endpoint under `pools[].confidential.customerManagedKey.attestationAuthority`.
"""

from __future__ import annotations

_REGION_CODES = {
    "eastus": "eus",
    "eastus2": "eus2",
    "westus": "wus",
    "centralus": "cus",
    "northeurope": "neu",
    "westeurope": "weu",
}

SHARED_ATTESTATION: dict[str, str] = {
    region: f"https://shared{code}.{code}.attest.azure.net/" for region, code in _REGION_CODES.items()
}
