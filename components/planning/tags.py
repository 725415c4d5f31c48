"""Tags cost and policy tooling key on. Every resource that holds machines carries all three."""

from __future__ import annotations

from typing import Literal

from gpucluster.vocabulary import CLUSTER_TAG, POOL_TAG, ROLE_TAG

Role = Literal["system", "cpu", "gpu", "confidential", "rack", "apiserver", "etcd", "etcd-events", "deploy-runner"]
REQUIRED_MACHINE_TAGS = (CLUSTER_TAG, ROLE_TAG, POOL_TAG)


def base_tags(cluster: str, extra: dict[str, str]) -> dict[str, str]:
    return {**extra, CLUSTER_TAG: cluster}


def machine_tags(cluster: str, role: Role, pool: str, extra: dict[str, str]) -> dict[str, str]:
    return {**base_tags(cluster, extra), ROLE_TAG: role, POOL_TAG: pool}

