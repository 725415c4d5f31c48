"""`cluster.pools[]`: logical node pools. Each becomes one or more scale sets."""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Literal

from pydantic import Field, field_validator, model_validator

from gpucluster.spec import consumer_rules as rules
from gpucluster.spec.base import SpecModel, WholeNumber
from gpucluster.spec.cost import PricingOption
from gpucluster.spec.images import NodeImageSpec

NAME_PATTERN = r"^[a-z][a-z0-9-]{0,18}[a-z0-9]$"
MAX_NODES = 65_536
"""Every node takes at least one private address in the VNet, and Azure allows 65,536 per VNet, a limit it
documents as fixed (MicrosoftDocs/azure-docs includes/azure-virtual-network-limits.md): no pool, and no
cluster, can be larger. Bounding it here also bounds the planners' work before they run."""
SUBGROUP_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,79}")
"""A name that fits an ARM child resource id segment; Azure documents no narrower rule for subgroups."""
MAX_PODS_PER_NODE = 255
"""Azure allows 256 private IPs per NIC (the same limits page); one is the node's own."""


class PoolKind(StrEnum):
    SYSTEM = "system"
    CPU = "cpu"
    GPU = "gpu"
    CONFIDENTIAL = "confidential"
    RACK = "rack"
    """NVLink racks (ND GB300 v6 / GB200 v6 NVL72): one scale set per rack in an interconnect group
    (docs/rack-scale.md)."""


class Taint(SpecModel):
    key: str = Field(max_length=317)
    value: str = Field(default="", max_length=63)
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] = "NoSchedule"

    @model_validator(mode="after")
    def _kubernetes_accepts(self) -> Taint:
        rules.check_taint(self.key, self.value)
        return self


class ImageRef(SpecModel):
    """A marketplace image: the source a node image is baked from (components/catalog/images.py)."""

    publisher: str = Field(min_length=1, max_length=128)
    offer: str = Field(min_length=1, max_length=128)
    sku: str = Field(min_length=1, max_length=128)
    version: str = Field(min_length=1, max_length=64)

    @field_validator("version")
    @classmethod
    def _azure_accepts_version(cls, version: str) -> str:
        return rules.check_image_version(version)


class CustomerManagedKeySpec(SpecModel):
    """Customer-managed key for confidential OS disks: a Key Vault (Premium) RSA-HSM key behind a
    confidential disk encryption set."""

    orchestrator_object_id: str = Field(max_length=100)
    """Object id of the "Confidential VM Orchestrator" service principal in the tenant
    (`az ad sp show --id bf7b6499-ff71-4aa2-97a4-f372087be7f0 --query id -o tsv`); it is granted key release."""
    attestation_authority: str | None = Field(default=None, pattern=r"^https://[a-z0-9.-]+/?$")
    """Microsoft Azure Attestation endpoint the key-release policy trusts; defaults to the region's shared one."""

    @field_validator("orchestrator_object_id")
    @classmethod
    def _guid(cls, value: str) -> str:
        return rules.check_guid(value)


class ConfidentialSpec(SpecModel):
    """Confidential-VM settings of a `kind: confidential` pool."""

    os_disk_encryption: Literal["VMGuestStateOnly", "DiskWithVMGuestState"] | None = None
    """What the confidential OS-disk encryption covers: the guest state only, or the OS disk too. Defaults to
    DiskWithVMGuestState with a customer-managed key (the only type a key works with), else VMGuestStateOnly."""
    customer_managed_key: CustomerManagedKeySpec | None = None


DEFAULT_SUBGROUP_SIZE = 18
"""VMs per NVLink rack: 18 VMs of 4 GPUs are one NVL72 domain ("Bandwidth is up to 72 GPUs per domain through
NVLINK", azure-compute-docs sizes/gpu-accelerated/nd-gb300-v6-series.md). Microsoft's interconnect-group examples
use 18 (azure-native `network:InterconnectGroup` example: `subgroupProfile.size: 18`) and 4."""


class InterconnectGroupSpec(SpecModel):
    """One interconnect group (`Microsoft.Network/interconnectGroups`): racks joined over InfiniBand, in one zone."""

    name: str = Field(pattern=NAME_PATTERN)
    """Names the interconnect group, its interconnect block and the `gpucluster.io/interconnect-group` label."""
    zone: str = Field(min_length=1, max_length=8)
    racks: WholeNumber = Field(ge=1, le=256)
    """NVLink racks (subgroups) in the group: each is one scale set of `subgroupSize` VMs."""
    subgroups: list[str] = Field(min_length=1, max_length=256)
    """The group's subgroup names in rack order, as Azure lists them (Subgroups list; `az network interconnect-group
    show --query 'subgroups[].name'`). Azure creates and names subgroups (Network 2025-07-01 `subgroups` readOnly); a
    scale set names its subgroup when it is created, so the names are an input here; `gpucluster verify` reads the
    group and fails a name it does not list (docs/rack-scale.md)."""

    @field_validator("subgroups")
    @classmethod
    def _subgroup_names(cls, names: list[str]) -> list[str]:
        for name in names:
            if not SUBGROUP_NAME.fullmatch(name):
                raise ValueError(f"{name!r} is not a subgroup name (letters, digits, '_', '.', '-', at most 80, no "
                                 "'/'); copy the names the group's Subgroups list shows")
        rules.check_unique(names)
        return names

    @model_validator(mode="after")
    def _one_subgroup_per_rack(self) -> InterconnectGroupSpec:
        if len(self.subgroups) != self.racks:
            raise ValueError(f"subgroups names {len(self.subgroups)} subgroups for {self.racks} racks: list one "
                             "subgroup name per rack, in rack order")
        return self


class RackSpec(SpecModel):
    """The racks of a `kind: rack` pool, declared per zone and per interconnect group."""

    subgroup_size: WholeNumber = Field(default=DEFAULT_SUBGROUP_SIZE, ge=1, le=72)
    """VMs per NVLink rack (the interconnect group's `subgroupProfile.size`)."""
    groups: list[InterconnectGroupSpec] = Field(min_length=1, max_length=64)
    high_speed_interconnect_placement: Literal["Trunk", "None"] = "Trunk"
    """The rack scale sets' `highSpeedInterconnectPlacement` (Microsoft.Compute, known values None and Trunk; in
    the create model only, so a change replaces every rack scale set). Trunk: the value Microsoft's one scale-set
    example with an interconnect block sends and gets back (docs/rack-scale.md)."""
    spare_racks_per_zone: WholeNumber = Field(default=0, ge=0, le=64)
    """Racks per zone the teams' quotas leave free, so a failed rack's gang restarts on a spare one (the policy
    pack's rack rules read it)."""

    @field_validator("groups")
    @classmethod
    def _unique_groups(cls, groups: list[InterconnectGroupSpec]) -> list[InterconnectGroupSpec]:
        rules.check_unique([g.name for g in groups])
        return groups

    @property
    def racks(self) -> int:
        return sum(g.racks for g in self.groups)


class PoolSpec(SpecModel):
    name: str = Field(pattern=NAME_PATTERN)
    """The pool's name: its scale sets, address block and tags are named from it, so renaming a pool replaces them."""
    kind: PoolKind
    """What the pool is for (system, cpu, gpu, confidential, rack); it decides the node image the pool boots."""
    vm_size: str = Field(pattern=r"^Standard_[A-Za-z0-9_]{1,60}$")
    """The Azure VM size: a catalogue size (components/catalog/vm_sizes.py) or one declared under vmSizes."""
    count: WholeNumber = Field(ge=1, le=MAX_NODES)
    """Nodes the pool holds: the scale sets' initial capacity and the autoscaler's maximum."""
    min_count: WholeNumber = Field(default=0, ge=0, le=MAX_NODES)
    """The autoscaler's minimum for the whole pool."""
    zones: list[str] | None = Field(default=None, min_length=1, max_length=3)
    """Zones for this pool; defaults to the cluster's zones."""
    infiniband: bool | None = None
    """Defaults to on where the size has InfiniBand."""
    pods_per_node: WholeNumber = Field(default=30, ge=1, le=MAX_PODS_PER_NODE)
    """Pods a node takes (the kubelet's `maxPods`) and the pod addresses its NIC carries (docs/ip-plan.md); at most
    255, as a NIC holds 256 private IPs."""
    work_pods_per_node: WholeNumber | None = Field(default=None, ge=1, le=MAX_PODS_PER_NODE)
    """Pods of work a node must still take after every per-node system pod (kubelet maxPods and the NIC's pod
    addresses); default 1."""
    pod_addresses: Literal["secondaryIps", "prefixes"] = "secondaryIps"
    """How pods get VNet addresses (docs/ip-plan.md). `secondaryIps`: one secondary IP configuration per pod,
    each an entry against the VNet's 65,536. `prefixes`: the NIC's primary address plus ceil(podsPerNode / 16)
    /28 blocks ("Prefix on NIC"), each block one entry; needs the subscription's onboarding to the preview."""
    priority: Literal["regular", "spot"] = "regular"
    """`spot`: Azure Spot VMs, priced at the Spot rate (docs/cost.md); refused on InfiniBand and rack pools."""
    pricing: PricingOption | None = None
    """How the pool's VMs are paid for, for the plan's cost (docs/cost.md): payg (the default), reservation1y,
    reservation3y, savingsPlan1y, savingsPlan3y; spot is implied by `priority: spot` and only by it."""
    labels: dict[str, str] = Field(default_factory=dict)
    """Node labels the kubelet registers; each is also one of the autoscaler's template tags on the scale sets."""
    taints: list[Taint] = Field(default_factory=list)
    """Taints the kubelet registers; each is also one of the autoscaler's template tags on the scale sets."""
    team: str | None = Field(default=None, max_length=63)
    """Becomes the scale sets' `team` tag."""
    cost_centre: str | None = Field(default=None, min_length=1, max_length=256)
    """Becomes the scale sets' `cost-centre` tag (Azure tag values: at most 256 characters)."""
    image: NodeImageSpec = NodeImageSpec()
    """The node image version the pool's machines boot (docs/images.md)."""
    accelerated_networking: bool | None = None
    """Defaults to what the size supports. Confidential (NCC) sizes have none."""
    confidential: ConfidentialSpec | None = None
    """Only on `kind: confidential` pools; defaults to VMGuestStateOnly with platform-managed keys."""
    os_disk_gib: WholeNumber = Field(default=128, ge=30, le=4095)
    """The OS disk's size in GiB."""
    racks: RackSpec | None = None
    """Only on `kind: rack` pools: the interconnect groups and their racks; `count` must be racks x subgroupSize."""

    @field_validator("zones")
    @classmethod
    def _zones(cls, zones: list[str] | None) -> list[str] | None:
        if zones is not None:
            rules.check_unique(zones)
        return zones

    @model_validator(mode="after")
    def _pricing_matches_priority(self) -> PoolSpec:
        if self.pricing == "spot" and self.priority != "spot":
            raise ValueError("pricing: spot prices Spot VMs: set priority: spot as well, or another pricing")
        if self.priority == "spot" and self.pricing not in (None, "spot"):
            raise ValueError(f"a priority: spot pool is billed at the Spot rate, not {self.pricing}: remove pricing")
        return self

    @property
    def pricing_option(self) -> str:
        return self.pricing or ("spot" if self.priority == "spot" else "payg")

    @field_validator("labels")
    @classmethod
    def _labels(cls, labels: dict[str, str]) -> dict[str, str]:
        return dict(rules.check_node_labels(labels))

    @field_validator("taints")
    @classmethod
    def _taints(cls, taints: list[Taint]) -> list[Taint]:
        rules.check_unique_taints((t.key, t.effect) for t in taints)
        return taints
