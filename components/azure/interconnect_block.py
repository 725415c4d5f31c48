"""InterconnectBlock: one Microsoft.Compute/interconnectBlocks resource, declared through the explicit-API route
(components/azure/interconnect_block_provider.py) until azure-native types it; docs/rack-scale.md."""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi.dynamic

from gpucluster.azure.interconnect_block_provider import InterconnectBlockProvider
from gpucluster.azure.interconnect_block_routes import INTERCONNECT_BLOCK_API_VERSION, INTERCONNECT_BLOCK_ARM_TYPE


class InterconnectBlock(pulumi.dynamic.Resource):
    """Pre-allocated capacity of one VM size in one zone for an interconnect group."""

    def __init__(self, name: str, subscription_id: pulumi.Input[str], inputs: dict[str, Any],
                 opts: pulumi.ResourceOptions | None = None, provider: InterconnectBlockProvider | None = None) -> None:
        props: dict[str, Any] = {"armType": INTERCONNECT_BLOCK_ARM_TYPE, "apiVersion": INTERCONNECT_BLOCK_API_VERSION,
                                 "subscriptionId": subscription_id, **inputs}
        super().__init__(provider or InterconnectBlockProvider(), name, props, opts)
