"""Upstream registries the cluster's registry can cache, and how an image reference names one.

ACR's artifact cache (MicrosoftDocs/azure-management-docs articles/container-registry/artifact-cache-overview.md,
"Upstream support", read 2026-08-20) caches these upstreams; Docker Hub only with credentials. Each upstream gets
one wildcard cache rule `<prefix>/*` <= `<host>/*` (wildcards-artifact-cache.md, "Repository level wildcard"):
rules may not overlap, so every prefix is its own top-level namespace and none is the project's own
(`gpucluster/`). At most 1,000 cache rules per registry (artifact-cache-overview.md, "Current limitations").
"""

from __future__ import annotations

from dataclasses import dataclass

ACR_SUPPORT_SOURCE = ("MicrosoftDocs/azure-management-docs articles/container-registry/artifact-cache-overview.md "
                      "'Upstream support' (ms.date 05/12/2025, read 2026-08-20)")
MAX_CACHE_RULES = 1000
OWN_NAMESPACE = "gpucluster"
"""Repositories the project builds into the registry itself (not cached): `gpucluster/<image>`."""


@dataclass(frozen=True)
class Upstream:
    host: str
    """As an image reference names it (`docker.io` for Docker Hub's normalized names)."""
    prefix: str
    """The registry's repository namespace the cache rule maps to the upstream's root."""
    endpoint: str
    """The upstream's registry API host, as containerd's `server` names it."""
    needs_credentials: bool = False


UPSTREAMS: dict[str, Upstream] = {u.host: u for u in (
    Upstream("registry.k8s.io", "k8s", "https://registry.k8s.io"),
    Upstream("quay.io", "quay", "https://quay.io"),
    Upstream("nvcr.io", "nvcr", "https://nvcr.io"),
    Upstream("ghcr.io", "ghcr", "https://ghcr.io"),
    Upstream("gcr.io", "gcr", "https://gcr.io"),
    Upstream("mcr.microsoft.com", "mcr", "https://mcr.microsoft.com"),
    Upstream("public.ecr.aws", "ecr-public", "https://public.ecr.aws"),
    Upstream("registry.access.redhat.com", "redhat", "https://registry.access.redhat.com"),
    # Docker Hub's registry API is registry-1.docker.io (containerd's docs/hosts.md, "docker.io" example).
    Upstream("docker.io", "docker", "https://registry-1.docker.io", needs_credentials=True),
)}


@dataclass(frozen=True)
class ImageRef:
    host: str
    path: str
    tag: str | None
    digest: str | None

    @property
    def repository(self) -> str:
        return f"{self.host}/{self.path}"

    def text(self, host_and_prefix: str | None = None) -> str:
        base = f"{host_and_prefix or self.host}/{self.path}"
        return base + (f":{self.tag}" if self.tag else "") + (f"@{self.digest}" if self.digest else "")


def parse_image(reference: str) -> ImageRef:
    """A reference as containerd and the kubelet normalize it (distribution/reference `ParseNormalizedNamed`):
    the first component is a host when it holds a `.` or `:` or is `localhost`, else the image is Docker Hub's,
    and a one-component Docker Hub name lives under `library/`."""
    name, _, digest_text = reference.partition("@")
    digest = digest_text or None
    tag = None
    last = name.rsplit("/", 1)[-1]
    if ":" in last:
        name, tag = name.rsplit(":", 1)
    first, _, rest = name.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost"):
        host, path = first, rest
    else:
        host, path = "docker.io", name
        if "/" not in path:
            path = f"library/{path}"
    return ImageRef(host, path, tag, digest)
