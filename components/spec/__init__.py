"""The stack's configuration as frozen pydantic models (`gpucluster:cluster` in stacks/Pulumi.<stack>.yaml)."""

from gpucluster.spec.cluster import AccessSpec, BootstrapTokenSpec, ClusterSpec, CustomVmSize
from gpucluster.spec.control_plane import ApiServerSpec, ControlPlaneSpec, EtcdSpec
from gpucluster.spec.images import ImageBuildSpec, ImagesSpec, NodeImageSpec
from gpucluster.spec.limits import LimitOverride, LimitsSpec, RegionZones
from gpucluster.spec.loader import CONFIG_KEY, StackFile, load_stack_file, parse_cluster, resolve_stack_path
from gpucluster.spec.network import EgressSpec, ExistingSubnetSpec, ExistingVnetSpec, NetworkSpec
from gpucluster.spec.pools import (
    ConfidentialSpec,
    CustomerManagedKeySpec,
    ImageRef,
    InterconnectGroupSpec,
    PoolKind,
    PoolSpec,
    RackSpec,
    Taint,
)
from gpucluster.spec.workloads import BalloonSpec, InClusterSpec, OversubscriptionSpec, Quota, TeamSpec

__all__ = [
    "CONFIG_KEY",
    "AccessSpec",
    "ApiServerSpec",
    "BalloonSpec",
    "BootstrapTokenSpec",
    "ClusterSpec",
    "ConfidentialSpec",
    "ControlPlaneSpec",
    "CustomVmSize",
    "CustomerManagedKeySpec",
    "EgressSpec",
    "EtcdSpec",
    "ExistingSubnetSpec",
    "ExistingVnetSpec",
    "ImageBuildSpec",
    "ImageRef",
    "ImagesSpec",
    "InClusterSpec",
    "InterconnectGroupSpec",
    "LimitOverride",
    "LimitsSpec",
    "NetworkSpec",
    "NodeImageSpec",
    "OversubscriptionSpec",
    "PoolKind",
    "PoolSpec",
    "Quota",
    "RackSpec",
    "RegionZones",
    "StackFile",
    "Taint",
    "TeamSpec",
    "load_stack_file",
    "parse_cluster",
    "resolve_stack_path",
]
