"""NodeScaleSet: one node scale set, declared through the capacity-free route (components/azure/scale_set/provider.py).

Its inputs are azure-native's `VirtualMachineScaleSet` inputs (same camelCase names and shapes), plus `armType`,
`apiVersion` and `subscriptionId`. Going back to azure-native's typed class once a release carries
`privateIPAddressPrefixLength` is an `aliases` entry naming this type (pulumi-python:dynamic:Resource) on the
typed resource; docs/architecture.md, "Node scale sets".
"""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi.dynamic

from gpucluster.azure.scale_set.provider import OPERATION, ScaleSetProvider
from gpucluster.azure.scale_set.routes import REPLACEMENT_ACK_INPUT, SCALE_SET_API_VERSION, SCALE_SET_ARM_TYPE

TYPED_SCALE_SET = "azure-native:compute:VirtualMachineScaleSet"


class NodeScaleSet(pulumi.dynamic.Resource):
    """A Microsoft.Compute/virtualMachineScaleSets resource whose update never sends sku."""

    operation: pulumi.Output[str | None]
    """The URL of the last write's long-running operation (an output: ScaleSetsReady waits on it)."""

    def __init__(self, name: str, subscription_id: pulumi.Input[str], inputs: dict[str, Any],
                 opts: pulumi.ResourceOptions | None = None, provider: ScaleSetProvider | None = None,
                 replacement_acknowledged: bool = False) -> None:
        props: dict[str, Any] = {"armType": SCALE_SET_ARM_TYPE, "apiVersion": SCALE_SET_API_VERSION,
                                 "subscriptionId": subscription_id, **inputs,
                                 OPERATION: None}  # an output only: a None input is not sent
        if replacement_acknowledged:  # the stack's acknowledgeDeletions covers it: the provider may replace it
            props[REPLACEMENT_ACK_INPUT] = True  # alongside other domains of its pool (azure/scale_set/replacement_guard.py)
        # A stack whose scale sets were created through the typed class keeps them: the engine matches the old
        # URN, this provider diffs the old state (pulumi/pulumi step_generator.go providerChanged: a provider
        # without DiffConfig asks for no replacement) and the first `up` is a PATCH, never a re-create.
        moved = pulumi.ResourceOptions(aliases=[pulumi.Alias(type_=TYPED_SCALE_SET)])
        super().__init__(provider or ScaleSetProvider(), name, props, pulumi.ResourceOptions.merge(opts, moved))
