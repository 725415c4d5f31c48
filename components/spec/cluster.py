"""`gpucluster:cluster`: the whole stack in one frozen model."""

from __future__ import annotations

from pydantic import Field

from components.spec.base import SpecModel
from components.spec.control_plane import ControlPlaneSpec
from components.spec.day2 import AcknowledgedDeletions
from components.spec.limits import LimitsSpec
from components.spec.network import NetworkSpec
from components.spec.pools import NAME_PATTERN, PoolSpec
from components.spec.workloads import BalloonSpec, InClusterSpec, TeamSpec


class CustomVmSize(SpecModel):
    """A VM size the catalogue lacks, declared in full (see components/catalog/vm_sizes.py)."""

    vcpus: int = Field(ge=1)
    memory_gib: int = Field(ge=1)
    gpus: int = Field(default=0, ge=0)
    gpu_model: str | None = None
    infiniband: bool = False
    accelerated_networking: bool = True
    max_nics: int = Field(ge=1)
    temp_disk_gib: int = Field(default=0, ge=0)
    nvme_gb: int = Field(default=0, ge=0)
    quota_family: str
    confidential: bool = False
    source: str = Field(min_length=3)


class AccessSpec(SpecModel):
    admin_username: str = Field(default="azureuser", pattern=r"^[a-z_][a-z0-9_-]{0,31}$")
    ssh_public_keys: list[str] = Field(default_factory=list)
    """OpenSSH public keys; with none, a break-glass key is generated and exported as a secret."""


class ClusterSpec(SpecModel):
    name: str = Field(pattern=NAME_PATTERN)
    location: str = Field(pattern=r"^[a-z0-9]+$")
    zones: list[str] = Field(min_length=1)
    kubernetes_version: str = Field(pattern=r"^1\.\d{2}\.\d{1,3}$")
    network: NetworkSpec
    pools: list[PoolSpec] = Field(default_factory=list)
    control_plane: ControlPlaneSpec = ControlPlaneSpec()
    teams: list[TeamSpec] = Field(default_factory=list)
    balloons: list[BalloonSpec] = Field(default_factory=list)
    in_cluster: InClusterSpec = InClusterSpec()
    limits: LimitsSpec = LimitsSpec()
    access: AccessSpec = AccessSpec()
    vm_sizes: dict[str, CustomVmSize] = Field(default_factory=dict)
    vcpu_quota: dict[str, int] = Field(default_factory=dict)
    """vCPU quota per family the subscription has in this region; the plan compares the need against it."""
    tags: dict[str, str] = Field(default_factory=dict)
    acknowledge_deletions: AcknowledgedDeletions = AcknowledgedDeletions()
    """Team namespaces and InfiniBand domains this change deletes on purpose (docs/operations.md)."""
