"""`cluster.controlPlane`: API servers and etcd outside the cluster."""

from __future__ import annotations

from pydantic import Field

from components.spec.base import SpecModel


class ApiServerSpec(SpecModel):
    count: int = Field(default=5, ge=1)
    vm_size: str | None = None
    """Override the computed size; too small for the node count is an error."""


class EtcdSpec(SpecModel):
    members: int = Field(default=5, ge=1)
    vm_size: str | None = None
    quorum_override_reason: str | None = None
    """Accept a zone holding a quorum of members (e.g. a one-zone region); say why."""


class ControlPlaneSpec(SpecModel):
    api_servers: ApiServerSpec = ApiServerSpec()
    etcd: EtcdSpec = EtcdSpec()
    events_etcd: EtcdSpec | None = EtcdSpec(members=3)
    """A separate etcd for Kubernetes Events; null keeps Events in the main etcd."""
