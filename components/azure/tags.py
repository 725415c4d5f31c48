"""Tags cost and policy tooling key on. Every resource that holds machines carries all three."""

from __future__ import annotations

from typing import Literal

Role = Literal["system", "cpu", "gpu", "confidential", "rack", "apiserver", "etcd", "etcd-events"]
CLUSTER_TAG = "gpucluster-cluster"
ROLE_TAG = "gpucluster-role"
POOL_TAG = "gpucluster-pool"
REQUIRED_MACHINE_TAGS = (CLUSTER_TAG, ROLE_TAG, POOL_TAG)


def base_tags(cluster: str, extra: dict[str, str]) -> dict[str, str]:
    return {**extra, CLUSTER_TAG: cluster}


def machine_tags(cluster: str, role: Role, pool: str, extra: dict[str, str]) -> dict[str, str]:
    return {**base_tags(cluster, extra), ROLE_TAG: role, POOL_TAG: pool}

KUBERNETES_VERSION_TAG = "gpucluster-kubernetes-version"
KUBERNETES_EOL_TAG = "gpucluster-kubernetes-end-of-life"
"""On the API-server scale set: the version it runs and its minor's end-of-life date, from the version table
(components/catalog/versions.py), so the policy pack judges support from the preview alone."""
