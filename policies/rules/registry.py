"""Images come from the cluster's own registry: a reference to a public registry in a Kubernetes object or a Helm
release's values is refused (Docker Hub's anonymous limit is 10 pulls per hour per IPv4 address, and a cluster
behind a NAT gateway shares a handful of addresses: docs/registry.md)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from pulumi_policy import ReportViolation, ResourceValidationArgs, Severity

from .declare import Config, resource_rule
from .props import get, items

RELEASE = "kubernetes:helm.sh/v3:Release"
POD_PATHS = {
    "kubernetes:apps/v1:Deployment": ("spec", "template", "spec"),
    "kubernetes:apps/v1:DaemonSet": ("spec", "template", "spec"),
    "kubernetes:apps/v1:StatefulSet": ("spec", "template", "spec"),
    "kubernetes:apps/v1:ReplicaSet": ("spec", "template", "spec"),
    "kubernetes:batch/v1:Job": ("spec", "template", "spec"),
    "kubernetes:batch/v1:CronJob": ("spec", "jobTemplate", "spec", "template", "spec"),
    "kubernetes:core/v1:Pod": ("spec",),
}
VALUE_KEYS = ("image", "repository", "imageRepository")
REGISTRY_CONFIG = {
    "allowedRegistries": {"type": "string", "default": r"^[a-z0-9]{5,50}\.azurecr\.io$",
                          "description": "A regular expression the registry host of every image must match."},
}


def registry_host(reference: str) -> str:
    """The registry an image reference pulls from, as the kubelet and containerd normalize it: a first component
    with `.` or `:` (or `localhost`) is a host, anything else is Docker Hub's."""
    first, _, rest = reference.partition("/")
    return first if rest and ("." in first or ":" in first or first == "localhost") else "docker.io"


def _value_references(values: Any, path: str = "values") -> list[tuple[str, str]]:
    """(path, reference) for strings under image-like keys. A bare name without `/` under `image` is an image name
    a chart joins to its own `repository` (the GPU operator's `image: gpu-operator`), not a reference."""
    found: list[tuple[str, str]] = []
    if isinstance(values, Mapping):
        for key, value in values.items():
            where = f"{path}.{key}"
            if isinstance(value, str) and key in VALUE_KEYS and value and ("/" in value or key != "image"):
                found.append((where, value))
            else:
                found += _value_references(value, where)
    elif isinstance(values, Sequence) and not isinstance(values, str):
        for index, value in enumerate(values):
            found += _value_references(value, f"{path}[{index}]")
    return found


@resource_rule(
    "kubernetes-image-public-registry", types=(*POD_PATHS, RELEASE), severity=Severity.HIGH,
    description="Every container image in a Kubernetes workload, and every image reference in a Helm release's "
                "values, comes from the cluster's own registry (allowedRegistries), never from a public one.",
    remediation="Serve the image through the cluster's registry (components/kubernetes/objects/images.py rewrites "
                "pod specs and chart values; a new upstream gets a cache rule: docs/registry.md).",
    config=REGISTRY_CONFIG)
def image_from_own_registry(args: ResourceValidationArgs, report: ReportViolation, config: Config) -> None:
    allowed = re.compile(str(config["allowedRegistries"]))
    if args.resource_type == RELEASE:
        references = _value_references(get(args.props, "values", default={}))
    else:
        pod = get(args.props, *POD_PATHS[args.resource_type], default={})
        references = [(f"{key}[{get(c, 'name')}].image", str(get(c, "image")))
                      for key in ("initContainers", "containers", "ephemeralContainers")
                      for c in items(get(pod, key)) if isinstance(get(c, "image"), str)]
    for where, reference in references:
        host = registry_host(reference)
        if not allowed.match(host):
            report(f"{get(args.props, 'metadata', 'name', default=get(args.props, 'name'))}: {where} = {reference} "
                   f"pulls from {host}, not the cluster's registry", None)


RULES = [image_from_own_registry]
