"""The node scale sets' create as it was before ScaleSetsReady: accepted, then waited for in the same RPC, holding a
worker of the dynamic-provider host until ARM's long-running operation ended. tests/test_provider_host_waves.py runs
it through the real host beside today's create, so the figures in docs/performance.md compare like with like."""

from __future__ import annotations

from typing import Any

from pulumi.dynamic import CreateResult

from gpucluster.azure.scale_set.provider import ScaleSetProvider, resource_id
from gpucluster.azure.scale_sets_ready_provider import ScaleSetsReadyProvider


class HeldWorkerProvider(ScaleSetProvider):
    def create(self, props: dict[str, Any]) -> CreateResult:
        created = super().create(props)
        outs = created.outs or {}
        ScaleSetsReadyProvider(self.endpoint, self.credential, self.connection_verify, self.polling_interval).create({
            "scaleSets": [{"name": props["vmScaleSetName"], "id": resource_id(props), "operation": outs.get("operation"),
                           "vmSize": props["sku"]["name"], "zone": props["zones"][0]}],
            "deadlineSeconds": 600, "concurrency": 1})
        return created
