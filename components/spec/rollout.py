"""`cluster.rollout`: how instances are re-imaged after `pulumi up` changes what they boot (docs/operations.md,
"Rolling a node image or boot change"). The planner (components/planning/rollout.py) turns it into ordered waves.

The durations are the project's estimates, not measurements: a stack that has timed a wave on its own machines
states them here."""

from __future__ import annotations

from pydantic import Field

from gpucluster.spec.base import SpecModel, WholeNumber


class RolloutSpec(SpecModel):
    gpu_domains_per_wave: WholeNumber = Field(default=1, ge=1, le=64)
    """InfiniBand domains (or NVLink racks) of one GPU pool out of service at once. Above 1, a wave also stays
    within the GPUs of the pool that no team's nominal quota holds."""
    batch_percent: WholeNumber = Field(default=10, ge=1, le=50)
    """A CPU or system pool's wave: scale sets of one zone adding up to at most this share of the pool's nodes
    (at least one scale set), and within the vCPUs no team's nominal quota holds."""
    reimage_minutes: WholeNumber = Field(default=15, ge=1, le=1440)
    """ARM's reimage of a scale set's instances, from request to the VMs running again."""
    boot_minutes: WholeNumber = Field(default=10, ge=1, le=1440)
    """First boot: cloud-init, kubeadm join, the node Ready."""
    preflight_minutes: WholeNumber = Field(default=15, ge=1, le=1440)
    """The GPU health agent's DCGM diagnostic (components/kubernetes/objects/health.py, `dcgmi diag -r 2`) until
    the preflight taint is removed; GPU pools only."""
    drain_deadline_minutes: WholeNumber = Field(default=240, ge=0, le=10_080)
    """After the checkpoint annotation, how long a wave waits for the workloads placed on its domain to finish
    before it evicts them whole (they requeue)."""
