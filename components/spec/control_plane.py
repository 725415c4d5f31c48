"""`cluster.controlPlane`: API servers and etcd outside the cluster."""

from __future__ import annotations

from pydantic import Field

from gpucluster.spec.base import SpecModel, WholeNumber
from gpucluster.spec.images import NodeImageSpec


class ApiServerSpec(SpecModel):
    count: WholeNumber = Field(default=5, ge=1, le=100)
    vm_size: str | None = Field(default=None, pattern=r"^Standard_[A-Za-z0-9_]{1,60}$")
    """Override the computed size; too small for the node count is an error."""
    image: NodeImageSpec = NodeImageSpec()
    """The API-server image version the scale set boots (docs/images.md)."""


class EtcdSpec(SpecModel):
    members: WholeNumber = Field(default=5, ge=1, le=9)
    """etcd's docs advise against clusters of more than 7 members (etcd.io FAQ, "What is maximum cluster size?")."""
    vm_size: str | None = Field(default=None, pattern=r"^Standard_[A-Za-z0-9_]{1,60}$")
    quorum_override_reason: str | None = Field(default=None, min_length=3, max_length=2000)
    """Accept a zone holding a quorum of members (e.g. a one-zone region); say why."""
    image: NodeImageSpec = NodeImageSpec()
    """The etcd image version new members boot; a member keeps the image it was created with (docs/images.md)."""


class ControlPlaneSpec(SpecModel):
    api_servers: ApiServerSpec = ApiServerSpec()
    etcd: EtcdSpec = EtcdSpec()
    events_etcd: EtcdSpec | None = EtcdSpec(members=3)
    """A separate etcd for Kubernetes Events; null keeps Events in the main etcd."""
