"""Small readers over policy props (engine camelCase names, possibly wrapped in proxies)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

SCALE_SET = "azure-native:compute:VirtualMachineScaleSet"
VIRTUAL_MACHINE = "azure-native:compute:VirtualMachine"
MACHINE_TYPES = (SCALE_SET, VIRTUAL_MACHINE)
# A Pulumi dynamic resource: the engine and CrossGuard see this type, whatever the provider builds.
DYNAMIC_RESOURCE = "pulumi-python:dynamic:Resource"
# ARM types a dynamic resource may declare in its `armType` input, and the azure-native type whose inputs
# (camelCase, `properties` flattened) it mirrors: rules written for the typed class apply to it unchanged.
INTERCONNECT_BLOCK = "azure-native:compute:InterconnectBlock"
"""How rules name an interconnect block: azure-native has no such type yet (docs/rack-scale.md), so this is the
name its typed class would take (azure-native names types `<module>:<Type>` after the ARM namespace)."""
ARM_TYPES = {"Microsoft.Compute/virtualMachineScaleSets": SCALE_SET, "Microsoft.Compute/interconnectBlocks":
             INTERCONNECT_BLOCK}
# The names the pack reads, spelled once here: the pack runs as a folder of its own (policies/__main__.py), without
# components/, so it keeps this copy of components/vocabulary.py's names; tests/test_vocabulary.py checks them equal.
CLUSTER_TAG = "gpucluster-cluster"
ROLE_TAG = "gpucluster-role"
POOL_TAG = "gpucluster-pool"
INFINIBAND_TAG = "gpucluster-infiniband"
KUBERNETES_VERSION_TAG = "gpucluster-kubernetes-version"
KUBERNETES_EOL_TAG = "gpucluster-kubernetes-end-of-life"
AUTOSCALER_ENABLED_TAG = "cluster-autoscaler-enabled"
# The cluster autoscaler's scale-from-zero tag for GPUs per node ('/' encoded as '_'); node pools always set it.
GPUS_TAG = "k8s.io_cluster-autoscaler_node-template_resources_nvidia.com_gpu"
GPU_RESOURCE = "nvidia.com/gpu"
ZONE_LABEL = "topology.kubernetes.io/zone"
LABEL_COMPONENT = "app.kubernetes.io/component"
ANNOTATION_WATCH_REASON = "gpucluster.io/cluster-wide-watch-reason"
LABEL_RACK = "gpucluster.io/rack"
ANNOTATION_SPARE_RACKS = "gpucluster.io/spare-racks-per-zone"
LABEL_TAG_PREFIX = "k8s.io_cluster-autoscaler_node-template_label_"
GPU_ROLES = ("gpu", "confidential", "rack")
ETCD_ROLES = ("etcd", "etcd-events")
# A machine without zones is regional: Azure may put it in any zone, so it counts as its own failure domain.
NO_ZONE = "(no zone)"


class Resource(Protocol):
    """What the rules read from a pulumi_policy.PolicyResource."""

    resource_type: str
    props: Any
    urn: str


def resource_kind(resource_type: str, props: Any) -> str:
    """The type rules judge a resource as: a dynamic resource declaring a known `armType` is read as the
    azure-native type it mirrors (node scale sets, components/azure/scale_set/routes.py); anything else is its own type."""
    if resource_type == DYNAMIC_RESOURCE and isinstance(props, Mapping):
        return ARM_TYPES.get(str(props.get("armType")), resource_type)
    return resource_type


def kind(resource: Resource) -> str:
    return resource_kind(resource.resource_type, resource.props)


def declared_api_version(resource_type: str, props: Any) -> str | None:
    """The api-version a dynamic resource declares (None for typed classes, whose provider picks it)."""
    if resource_type == DYNAMIC_RESOURCE and isinstance(props, Mapping) and isinstance(props.get("apiVersion"), str):
        return props["apiVersion"]
    return None


def get(props: Any, *path: str | int, default: Any = None) -> Any:
    """props["a"]["b"][0]... or `default` when any step is missing."""
    current = props
    for step in path:
        if isinstance(step, int):
            if not isinstance(current, Sequence) or isinstance(current, str) or step >= len(current):
                return default
            current = current[step]
        else:
            if not isinstance(current, Mapping) or step not in current:
                return default
            current = current[step]
    return default if current is None else current


def items(value: Any) -> list[Any]:
    return list(value) if isinstance(value, Sequence) and not isinstance(value, str) else []


def tags(props: Any) -> Mapping[str, Any]:
    value = get(props, "tags", default={})
    return value if isinstance(value, Mapping) else {}


def role(props: Any) -> str | None:
    value = tags(props).get(ROLE_TAG)
    return value if isinstance(value, str) else None


def zones(props: Any) -> list[str]:
    return [str(z) for z in items(get(props, "zones"))]


def capacity(resource: Resource) -> int:
    """Machines a resource stands for: a scale set's declared capacity, 1 for a VM."""
    if kind(resource) == SCALE_SET:
        return int(get(resource.props, "sku", "capacity", default=0))
    return 1


def machines_per_zone(resource: Resource) -> dict[str, int]:
    """How a resource's machines sit in zones. A zone-spanning scale set with zoneBalance spreads evenly
    (the first zones take the remainder); without zoneBalance Azure only tries, so count it as regional."""
    count, where = capacity(resource), zones(resource.props)
    if not where:
        return {NO_ZONE: count}
    if len(where) == 1:
        return {where[0]: count}
    if get(resource.props, "zoneBalance") is not True:
        return {NO_ZONE: count}
    base, extra = divmod(count, len(where))
    return {zone: base + (1 if i < extra else 0) for i, zone in enumerate(where)}


def gpus_per_machine(props: Any) -> int | None:
    value = tags(props).get(GPUS_TAG)
    try:
        return int(value) if value is not None else None
    except (TypeError, ValueError):
        return None


def of_roles(resources: Iterable[Resource], *roles: str) -> list[Resource]:
    return [r for r in resources if kind(r) in MACHINE_TYPES and role(r.props) in roles]


def nic_configs(props: Any) -> list[Any]:
    """The NIC configurations of a scale set's VM profile."""
    return items(get(props, "virtualMachineProfile", "networkProfile", "networkInterfaceConfigurations"))


def last_segment(resource_id: Any, kind: str) -> str | None:
    """The name after `/<kind>/` in an Azure resource id (…/subnets/etcd -> etcd)."""
    if not isinstance(resource_id, str):
        return None
    parts = resource_id.split("/")
    for i, part in enumerate(parts[:-1]):
        if part.lower() == kind.lower():
            return parts[i + 1]
    return None
