"""The ARM clients verify reads with, built once each and only when a check needs them, all behind the read-only
transport (components/verify/connect.py)."""

from __future__ import annotations

from functools import cached_property
from typing import Any

from gpucluster.planning.azure_names import resource_group_name
from gpucluster.planning.cluster_plan import ClusterPlan
from gpucluster.verify import bounds
from gpucluster.verify.connect import AzureAccess


class Arm:
    def __init__(self, access: AzureAccess, plan: ClusterPlan) -> None:
        self.access = access
        self.subscription = access.subscription
        self.location = plan.spec.location
        self.resource_group = resource_group_name(plan.spec.name)

    @cached_property
    def compute(self) -> Any:
        from azure.mgmt.compute import ComputeManagementClient

        return self.access.client(ComputeManagementClient)

    @cached_property
    def resources(self) -> Any:
        from azure.mgmt.resource.resources import ResourceManagementClient

        return self.access.client(ResourceManagementClient)

    @cached_property
    def features(self) -> Any:
        from azure.mgmt.resource.features import FeatureClient

        return self.access.client(FeatureClient)

    @cached_property
    def registry(self) -> Any:
        from azure.mgmt.containerregistry import ContainerRegistryManagementClient

        return self.access.client(ContainerRegistryManagementClient)

    def get_json(self, url: str) -> dict[str, Any]:
        """A raw GET through the compute client's pipeline (auth, retries, the read-only transport), for responses
        read as their REST JSON rather than as SDK models."""
        from azure.core.rest import HttpRequest

        response = self.compute.send_request(HttpRequest("GET", url, headers={"Accept": "application/json"}))
        response.raise_for_status()
        return response.json()

    def get_pages(self, url: str) -> list[dict[str, Any]]:
        """Every `value` of a list, following `nextLink` within verify's bounds: each link once, at most MAX_PAGES,
        each to ARM's own origin over https (the transport refuses any other before the token is attached)."""

        def fetch(link: str | None) -> tuple[list[dict[str, Any]], str | None]:
            page = self.get_json(link or url)
            following = page.get("nextLink")
            return list(page.get("value") or []), following if isinstance(following, str) and following else None

        return [item for page in bounds.pages(fetch, f"GET {url.split('?')[0]}") for item in page]


def not_found() -> type[Exception]:
    from azure.core.exceptions import ResourceNotFoundError

    return ResourceNotFoundError
