"""Every image the in-cluster layer names, served by the cluster's registry: one pass over the built objects and
one over each chart's values, so no builder can forget an image (tests/test_registry.py reads the output)."""

from __future__ import annotations

from typing import Any

from gpucluster.catalog.chart_images import CHART_IMAGES
from gpucluster.kubernetes.objects.common import Object
from gpucluster.planning.registry import RegistryPlan

POD_TEMPLATE_PATHS = {
    "Deployment": ("spec", "template", "spec"), "DaemonSet": ("spec", "template", "spec"),
    "StatefulSet": ("spec", "template", "spec"), "Job": ("spec", "template", "spec"),
    "CronJob": ("spec", "jobTemplate", "spec", "template", "spec"), "Pod": ("spec",),
}
CONTAINER_LISTS = ("initContainers", "containers", "ephemeralContainers")


def _copy(value: Any) -> Any:
    """Dicts and lists copied, leaves shared: values may hold Pulumi outputs, which cannot be deep-copied."""
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


def pod_spec(o: Object) -> dict[str, Any] | None:
    node: Any = o
    for key in POD_TEMPLATE_PATHS.get(o.get("kind", ""), ()):
        node = node.get(key) if isinstance(node, dict) else None
    return node if isinstance(node, dict) and o.get("kind") in POD_TEMPLATE_PATHS else None


def serve_objects(objects: list[Object], registry: RegistryPlan) -> list[Object]:
    """Copies of the objects with each container's image as the registry serves it."""
    served = []
    for o in objects:
        o = _copy(o)
        spec = pod_spec(o)
        for key in CONTAINER_LISTS:
            for container in (spec or {}).get(key, []):
                container["image"] = registry.serve(container["image"])
        served.append(o)
    return served


def serve_chart_values(chart: str, values: dict[str, Any], registry: RegistryPlan) -> dict[str, Any]:
    """The values with every image block of the chart (components/catalog/chart_images.py) pointing at the
    registry; the chart keeps its own tags and digests unless the table pins one."""
    values = _copy(values)
    for image in CHART_IMAGES[chart]:
        block = values
        for key in image.path:
            block = block.setdefault(key, {})
        block["repository"] = registry.serve(image.upstream)
        if image.tag_key and image.tag:
            block[image.tag_key] = image.tag
    return values
