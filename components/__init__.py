"""gpucluster: Pulumi components for a self-managed Kubernetes GPU training cluster on Azure.

What a program needs, from one import (examples/own_program/__main__.py):

    from gpucluster import ClusterSpec, GpuCluster, GpuClusterArgs, PoolKind, PoolSpec, plan_checked

The names load when first used (PEP 562 `__getattr__`), so `import gpucluster.spec` or the CLI does not pay for the
Pulumi and Azure SDKs a component imports. The folder is components/ in the project; `gpucluster` is its import name
(pyproject.toml).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpucluster.azure.scale_set.body import NodeAccess
    from gpucluster.azure.scale_set.join import ClusterMetadata, NodeJoin, NodeRegistry, pool_join
    from gpucluster.azure.scale_set.pool import NodePool, NodePoolArgs
    from gpucluster.azure.scope import AzureScope
    from gpucluster.cluster import GpuCluster, GpuClusterArgs
    from gpucluster.errors import Problem, SpecError
    from gpucluster.planning.placement import plan_pool
    from gpucluster.simulation.check import CheckedPlan, plan_checked
    from gpucluster.spec import (
        ApiServerSpec,
        ClusterSpec,
        ControlPlaneSpec,
        EtcdSpec,
        ExistingSubnetSpec,
        ExistingVnetSpec,
        NetworkSpec,
        PoolKind,
        PoolSpec,
        TeamSpec,
        load_stack_file,
        parse_cluster,
    )
    from gpucluster.spec.alerts import AlertsSpec
    from gpucluster.spec.metrics import MetricsSpec
    from gpucluster.spec.registry_name import SUBSCRIPTION_CONFIG, naming_subscription, with_registry_name

EXPORTS: dict[str, str] = {
    "GpuCluster": "gpucluster.cluster", "GpuClusterArgs": "gpucluster.cluster",
    "NodePool": "gpucluster.azure.scale_set.pool", "NodePoolArgs": "gpucluster.azure.scale_set.pool",
    "AzureScope": "gpucluster.azure.scope",
    **{name: "gpucluster.azure.scale_set.join" for name in ("ClusterMetadata", "NodeJoin", "NodeRegistry",
                                                             "pool_join")},
    "NodeAccess": "gpucluster.azure.scale_set.body", "plan_pool": "gpucluster.planning.placement",
    "SpecError": "gpucluster.errors", "Problem": "gpucluster.errors",
    "CheckedPlan": "gpucluster.simulation.check", "plan_checked": "gpucluster.simulation.check",
    **{name: "gpucluster.spec" for name in ("ApiServerSpec", "ClusterSpec", "ControlPlaneSpec", "EtcdSpec",
                                             "ExistingSubnetSpec", "ExistingVnetSpec", "NetworkSpec", "PoolKind",
                                             "PoolSpec", "TeamSpec", "load_stack_file", "parse_cluster")},
    "AlertsSpec": "gpucluster.spec.alerts", "MetricsSpec": "gpucluster.spec.metrics",
    **{name: "gpucluster.spec.registry_name" for name in ("SUBSCRIPTION_CONFIG", "naming_subscription",
                                                           "with_registry_name")},
}
"""Each public name -> the module that defines it."""

__all__ = [
    "SUBSCRIPTION_CONFIG",
    "AlertsSpec",
    "ApiServerSpec",
    "AzureScope",
    "CheckedPlan",
    "ClusterMetadata",
    "ClusterSpec",
    "ControlPlaneSpec",
    "EtcdSpec",
    "ExistingSubnetSpec",
    "ExistingVnetSpec",
    "GpuCluster",
    "GpuClusterArgs",
    "MetricsSpec",
    "NetworkSpec",
    "NodeAccess",
    "NodeJoin",
    "NodePool",
    "NodePoolArgs",
    "NodeRegistry",
    "PoolKind",
    "PoolSpec",
    "Problem",
    "SpecError",
    "TeamSpec",
    "load_stack_file",
    "naming_subscription",
    "parse_cluster",
    "plan_checked",
    "plan_pool",
    "pool_join",
    "with_registry_name",
]
"""The same names as EXPORTS (tests/test_import_name.py)."""


def __getattr__(name: str) -> Any:
    if name not in EXPORTS:
        raise AttributeError(f"module 'gpucluster' has no attribute {name!r}")
    value = getattr(importlib.import_module(EXPORTS[name]), name)
    globals()[name] = value  # loaded once
    return value
