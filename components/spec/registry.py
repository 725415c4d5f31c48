"""`cluster.registry`: the cluster's own Azure Container Registry (docs/registry.md)."""

from __future__ import annotations

import re

from pydantic import Field, field_validator

from gpucluster.spec.base import SpecModel

REGISTRY_NAME_PATTERN = r"^[a-zA-Z0-9]{5,50}$"
"""Microsoft.ContainerRegistry/registries: 5-50 alphanumerics, globally unique (resource-name-rules.md)."""
UPSTREAM_PATTERN = r"^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)+$"
KEY_VAULT_ID = re.compile(
    r"^/subscriptions/[0-9a-fA-F-]{36}/resourceGroups/[-\w.()]{1,90}/providers/Microsoft\.KeyVault/vaults/"
    r"[a-zA-Z][a-zA-Z0-9-]{1,22}[a-zA-Z0-9]$")
SECRET_NAME_PATTERN = r"^[0-9a-zA-Z-]{1,127}$"
"""Key Vault secret names: 1-127 alphanumerics and hyphens (Key Vault "About keys, secrets and certificates")."""


class DockerHubCredentials(SpecModel):
    """A Docker Hub account's username and access token, kept as secrets in a Key Vault the stack does not own.
    ACR's artifact cache pulls from Docker Hub only with credentials (artifact-cache-overview.md)."""

    key_vault_id: str
    username_secret: str = Field(pattern=SECRET_NAME_PATTERN)
    password_secret: str = Field(pattern=SECRET_NAME_PATTERN)
    """The secret holding a Docker Hub personal access token (read-only scope is enough)."""

    @field_validator("key_vault_id")
    @classmethod
    def _vault(cls, value: str) -> str:
        if not KEY_VAULT_ID.match(value):
            raise ValueError("must be a Key Vault resource id: /subscriptions/<subscription id>/resourceGroups/<group>/"
                             "providers/Microsoft.KeyVault/vaults/<name>")
        return value

    @property
    def vault_name(self) -> str:
        return self.key_vault_id.rsplit("/", 1)[1]


class RegistrySpec(SpecModel):
    name: str | None = Field(default=None, pattern=REGISTRY_NAME_PATTERN)
    """The registry's name (its login server is `<name>.azurecr.io`); by default the cluster's name and a hash.
    Registry names are global across Azure: set one here if the default is taken."""
    extra_upstreams: list[str] = Field(default_factory=list, max_length=20)
    """Upstream registries to cache beside the ones the cluster's own images come from (for workloads)."""
    docker_hub: DockerHubCredentials | None = None
    """Needed when docker.io is an upstream."""

    @field_validator("extra_upstreams")
    @classmethod
    def _hosts(cls, hosts: list[str]) -> list[str]:
        for host in hosts:
            if not re.match(UPSTREAM_PATTERN, host):
                raise ValueError(f"{host!r} is not a registry host name (e.g. docker.io, ghcr.io)")
        if len(set(hosts)) != len(hosts):
            raise ValueError("lists an upstream twice")
        return hosts
