"""`cluster.pools[]`: logical node pools. Each becomes one or more scale sets."""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from pydantic import Field

from components.spec.base import SpecModel

NAME_PATTERN = r"^[a-z][a-z0-9-]{0,18}[a-z0-9]$"
LABEL_KEY_PATTERN = r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"


class PoolKind(StrEnum):
    SYSTEM = "system"
    CPU = "cpu"
    GPU = "gpu"
    CONFIDENTIAL = "confidential"


class Taint(SpecModel):
    key: str = Field(pattern=LABEL_KEY_PATTERN)
    value: str = Field(default="", max_length=63)
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] = "NoSchedule"


class ImageRef(SpecModel):
    publisher: str
    offer: str
    sku: str
    version: str = "latest"
    """A pinned version (`az vm image list --publisher P --offer O --sku S --all`). `latest` lets VMs created
    later boot a newer build than the running ones (drivers, OFED), so it is refused unless `allowLatest`."""
    allow_latest: bool = False
    """Opt in to `version: latest` (never for InfiniBand pools: a policy rule refuses mixed builds there)."""


class CustomerManagedKeySpec(SpecModel):
    """Customer-managed key for confidential OS disks: a Key Vault (Premium) RSA-HSM key behind a
    confidential disk encryption set."""

    orchestrator_object_id: str = Field(pattern=r"^[0-9a-fA-F-]{36}$")
    """Object id of the "Confidential VM Orchestrator" service principal in the tenant
    (`az ad sp show --id bf7b6499-ff71-4aa2-97a4-f372087be7f0 --query id -o tsv`); it is granted key release."""
    attestation_authority: str | None = Field(default=None, pattern=r"^https://[a-z0-9.-]+/?$")
    """Microsoft Azure Attestation endpoint the key-release policy trusts; defaults to the region's shared one."""


class ConfidentialSpec(SpecModel):
    """Confidential-VM settings of a `kind: confidential` pool."""

    os_disk_encryption: Literal["VMGuestStateOnly", "DiskWithVMGuestState"] = "VMGuestStateOnly"
    """What the confidential OS-disk encryption covers. Scale sets support only VMGuestStateOnly."""
    customer_managed_key: CustomerManagedKeySpec | None = None


class PoolSpec(SpecModel):
    name: str = Field(pattern=NAME_PATTERN)
    kind: PoolKind
    vm_size: str
    count: int = Field(ge=1)
    """Nodes the pool holds: the scale sets' initial capacity and the autoscaler's maximum."""
    min_count: int = Field(default=0, ge=0)
    """The autoscaler's minimum for the whole pool."""
    zones: list[str] | None = None
    """Zones for this pool; defaults to the cluster's zones."""
    infiniband: bool | None = None
    """Defaults to on where the size has InfiniBand."""
    pods_per_node: int = Field(default=30, ge=1)
    priority: Literal["regular", "spot"] = "regular"
    labels: dict[str, str] = Field(default_factory=dict)
    taints: list[Taint] = Field(default_factory=list)
    team: str | None = None
    cost_centre: str | None = None
    image: ImageRef | None = None
    accelerated_networking: bool | None = None
    """Defaults to what the size supports. Confidential (NCC) sizes have none."""
    confidential: ConfidentialSpec | None = None
    """Only on `kind: confidential` pools; defaults to VMGuestStateOnly with platform-managed keys."""
    os_disk_gib: int = Field(default=128, ge=30, le=4095)
