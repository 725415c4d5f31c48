"""`gpucluster:cluster`: the whole stack in one frozen model."""

from __future__ import annotations

from pydantic import Field, field_validator, model_validator

from gpucluster.spec import consumer_rules as rules
from gpucluster.spec.base import Cidr, SpecModel, WholeNumber
from gpucluster.spec.control_plane import ControlPlaneSpec
from gpucluster.spec.cost import CostSpec
from gpucluster.spec.day2 import AcknowledgedDeletions
from gpucluster.spec.deploy_runner import DeployRunnerSpec
from gpucluster.spec.images import ImagesSpec
from gpucluster.spec.limits import LimitsSpec
from gpucluster.spec.metrics import MetricsSpec
from gpucluster.spec.network import NetworkSpec
from gpucluster.spec.pools import MAX_NODES, NAME_PATTERN, PoolSpec
from gpucluster.spec.quota import ResourceQuotaSpec
from gpucluster.spec.registry import RegistrySpec
from gpucluster.spec.rollout import RolloutSpec
from gpucluster.spec.workloads import BalloonSpec, InClusterSpec, TeamSpec

LIBRARY_TAGS = 5
"""The most tags the library adds where `cluster.tags` go: cluster, role and pool (components/planning/tags.py),
and on the API-server scale set the Kubernetes version and its end of life."""


class CustomVmSize(SpecModel):
    """A VM size the catalogue lacks, declared in full (see components/catalog/vm_sizes.py)."""

    vcpus: WholeNumber = Field(ge=1, le=1024)
    memory_gib: WholeNumber = Field(ge=1, le=65_536)
    gpus: WholeNumber = Field(default=0, ge=0, le=16)
    gpu_model: str | None = None
    gpu_vendor: str | None = Field(default=None, pattern=r"^[a-z][a-z0-9-]{0,39}$")
    """Who makes the GPUs, lowercase (`nvidia`); required when `gpus` > 0 (the planner checks it is supported)."""
    infiniband: bool = False
    accelerated_networking: bool = True
    max_nics: WholeNumber = Field(ge=1, le=8)
    """Azure sizes take at most 8 NICs."""
    temp_disk_gib: WholeNumber = Field(default=0, ge=0, le=1_000_000)
    nvme_gb: WholeNumber = Field(default=0, ge=0, le=1_000_000)
    quota_family: str = Field(pattern=r"^[A-Za-z0-9]{1,80}$")
    confidential: bool = False
    source: str = Field(min_length=3, max_length=2000)


class BootstrapTokenSpec(SpecModel):
    """The kubeadm bootstrap tokens nodes join with: declared by the stack as bootstrap-token Secrets, rotated
    on a schedule (components/planning/bootstrap_tokens.py, docs/operations.md "The bootstrap token")."""

    generation: WholeNumber = Field(default=1, ge=1, le=1_000_000)
    """Raise it to replace both tokens at the next `pulumi up` (a leaked token): the old ones are deleted."""
    rotation_days: WholeNumber = Field(default=30, ge=1, le=365)
    """A new token every this many days (UTC days since 1970-01-01), taken at the first `pulumi up` after."""
    overlap_days: WholeNumber = Field(default=30, ge=1, le=365)
    """How long the previous token stays valid after a rotation, for machines created from older models."""

    @model_validator(mode="before")
    @classmethod
    def _no_ttl(cls, value: object) -> object:
        if isinstance(value, dict) and ({"ttlHours", "ttl_hours"} & set(value)):
            raise ValueError("ttlHours is gone: kubeadm no longer writes the token, the stack's Secret carries its "
                             "expiry; set rotationDays and overlapDays instead (docs/operations.md)")
        return value

    @model_validator(mode="after")
    def _overlap(self) -> BootstrapTokenSpec:
        if self.overlap_days > self.rotation_days:
            raise ValueError(f"overlapDays ({self.overlap_days}) must be at most rotationDays ({self.rotation_days}): "
                             "the stack keeps two tokens, the current one and the one before it")
        return self


class SizeRegionsSpec(SpecModel):
    """Where a VM size is offered, as the stack has confirmed it (replaces components/catalog/availability.py's row)."""

    regions: list[str] = Field(min_length=1, max_length=100)
    zones: dict[str, list[str]] | None = Field(default=None, max_length=100)
    """Region -> zones offering the size in this subscription (`az vm list-skus --zone`), where known."""
    source: str = Field(min_length=3, max_length=2000)
    """How it was confirmed, with the date: e.g. `az vm list-skus -l eastus --size Standard_X --zone, 2026-11-20`."""


class BreakGlassSpec(SpecModel):
    """A second API-server endpoint for incidents, reachable only from an admin network, and a client certificate
    whose group API Priority and Fairness exempts (docs/operations.md, "When the API servers are overloaded")."""

    admin_cidrs: list[Cidr] = Field(min_length=1, max_length=20)
    """The only networks the break-glass frontend accepts (an NSG rule of its own); keep it apart from
    network.adminCidrs, which reach the normal endpoint."""


class AccessSpec(SpecModel):
    admin_username: str = Field(default="azureuser", pattern=r"^[a-z_][a-z0-9_-]{0,31}$")
    ssh_public_keys: list[str] = Field(default_factory=list, max_length=64)
    """OpenSSH public keys; with none, a break-glass key is generated and exported as a secret."""
    bootstrap_token: BootstrapTokenSpec = BootstrapTokenSpec()
    break_glass: BreakGlassSpec | None = None
    """The break-glass endpoint; without it the break-glass certificate still exists and reaches the normal one."""

    @field_validator("admin_username")
    @classmethod
    def _azure_accepts_username(cls, name: str) -> str:
        return rules.check_admin_username(name)

    @field_validator("ssh_public_keys", mode="before")
    @classmethod
    def _public_keys(cls, keys: object) -> object:
        """Checked before pydantic sees them, so no error ever echoes a key (a private one would be a secret)."""
        if isinstance(keys, list):
            for index, key in enumerate(keys):
                if not isinstance(key, str) or len(key) > 16_384:
                    raise ValueError(f"[{index}] must be one OpenSSH public-key line (at most 16 KiB)")
                try:
                    rules.check_ssh_public_key(key)
                except ValueError as error:
                    raise ValueError(f"[{index}] {error}") from None
        return keys


class PatchVerification(SpecModel):
    """A Kubernetes patch release newer than the version table knows, confirmed by hand (docs/versions.md)."""

    version: str = Field(max_length=20)
    """The patch confirmed: it must be the stack's kubernetesVersion, so a later bump needs a new confirmation."""
    source: str = Field(min_length=3, max_length=2000)
    """Where the release and its kubelet/kubeadm packages were seen, with the date: e.g. `kubernetes.io/releases
    lists 1.36.5; apt-cache madison kubeadm on pkgs.k8s.io core:/stable:/v1.36 shows 1.36.5-1.1, 2026-12-12`."""


class ClusterSpec(SpecModel):
    name: str = Field(pattern=NAME_PATTERN)
    """The cluster's name, lowercase: in its Azure resources' names and tags (its resource group is
    gpucluster-<name>). A stack copied from another keeps it: `plan` and the program warn when two stack files name the
    same cluster."""
    location: str = Field(pattern=r"^[a-z0-9]{1,40}$")
    """The Azure region: in components/catalog/regions.py or declared under limits.regionZones, and offering ACR
    Tasks agent pools (components/catalog/acr_tasks.py, docs/registry.md)."""
    zones: list[str] = Field(min_length=1, max_length=3)
    """The availability zones the cluster uses, each once and among the region's."""
    kubernetes_version: str = Field(max_length=20)
    """MAJOR.MINOR.PATCH: any released patch of a minor the version table supports (components/catalog/versions.py);
    a patch newer than the table's needs kubernetesPatchVerified."""
    kubernetes_patch_verified: PatchVerification | None = None
    network: NetworkSpec
    """The VNet: its address space, the Service range, egress, peering and the blocks' layout (docs/ip-plan.md)."""
    pools: list[PoolSpec] = Field(default_factory=list, max_length=100)
    """The node pools (docs/capacity.md; rack pools: docs/rack-scale.md; confidential pools: docs/confidential.md)."""
    control_plane: ControlPlaneSpec = ControlPlaneSpec()
    """The API servers and etcd, on machines of their own outside the cluster (docs/control-plane.md)."""
    images: ImagesSpec = ImagesSpec()
    """The version of each node image this stack builds (docs/images.md)."""
    teams: list[TeamSpec] = Field(default_factory=list, max_length=500)
    balloons: list[BalloonSpec] = Field(default_factory=list, max_length=100)
    in_cluster: InClusterSpec = InClusterSpec()
    limits: LimitsSpec = LimitsSpec()
    """Azure limits this stack has had raised, each with the request that raised it (components/catalog/limits.py)."""
    access: AccessSpec = AccessSpec()
    """How operators and nodes get in: the admin user and SSH keys, the bootstrap tokens, the break-glass endpoint."""
    registry: RegistrySpec = RegistrySpec()
    """The cluster's container registry: every image comes through it (docs/registry.md)."""
    metrics: MetricsSpec = MetricsSpec()
    """The telemetry pipeline: scrape interval, edge shards, the workspace's raised limits (docs/metrics.md)."""
    vm_sizes: dict[str, CustomVmSize] = Field(default_factory=dict, max_length=100)
    """Sizes the catalogue lacks, declared in full (the key is the size's name)."""
    size_regions: dict[str, SizeRegionsSpec] = Field(default_factory=dict, max_length=100)
    """Confirmed availability of sizes (regions, zones), overriding the catalogue's rows."""
    vcpu_quota: dict[str, WholeNumber] = Field(default_factory=dict, max_length=100)
    """vCPU quota per family the subscription has in this region; the plan compares the need against it."""
    resource_quota: ResourceQuotaSpec = ResourceQuotaSpec()
    """Other per-subscription counts the subscription has in this region (components/catalog/quotas.py)."""
    tags: dict[str, str] = Field(default_factory=dict)
    """Tags on the network and control-plane resources, beside the library's own (at most 5 on a resource)."""
    acknowledge_deletions: AcknowledgedDeletions = AcknowledgedDeletions()
    """Team namespaces and InfiniBand domains this change deletes on purpose (docs/operations.md)."""
    cost: CostSpec = CostSpec()
    """How the plan prices the cluster: the user's price file and the age past which prices are stale."""
    rollout: RolloutSpec = RolloutSpec()
    """How instances are re-imaged one wave at a time after a change to what they boot (docs/operations.md)."""
    deploy_runner: DeployRunnerSpec = DeployRunnerSpec()
    """The VM in the VNet that step 2 of the first `pulumi up` and later updates run on (docs/operations.md)."""

    @field_validator("zones")
    @classmethod
    def _zones(cls, zones: list[str]) -> list[str]:
        return rules.check_unique(zones)

    @field_validator("kubernetes_version")
    @classmethod
    def _version(cls, version: str) -> str:
        return rules.check_kubernetes_version(version)

    @field_validator("tags")
    @classmethod
    def _tags(cls, tags: dict[str, str]) -> dict[str, str]:
        return dict(rules.check_tags(tags, reserved=LIBRARY_TAGS))

    @field_validator("vcpu_quota")
    @classmethod
    def _quota(cls, quota: dict[str, int]) -> dict[str, int]:
        for family, value in quota.items():
            if not 0 <= value <= 100_000_000:
                raise ValueError(f"{family}: {value} is not a vCPU quota (0 to 100,000,000)")
        return quota

    @model_validator(mode="after")
    def _patch_verified_for_this_version(self) -> ClusterSpec:
        verified = self.kubernetes_patch_verified
        if verified is not None and verified.version != self.kubernetes_version:
            raise ValueError(f"kubernetesPatchVerified confirms {verified.version!r} but kubernetesVersion is "
                             f"{self.kubernetes_version!r}: confirm the new patch and update both, or remove it")
        return self

    @model_validator(mode="after")
    def _bounded(self) -> ClusterSpec:
        nodes = sum(p.count for p in self.pools)
        if nodes > MAX_NODES:
            raise ValueError(f"the pools hold {nodes:,} nodes; a VNet holds at most {MAX_NODES:,} private addresses "
                             "(a limit Azure documents as fixed), so no cluster can be larger")
        return self
