"""`image:` on a pool or control-plane role: which baked node image version its machines boot.

Every machine boots a version of one of the cluster's own Azure Compute Gallery images (docs/images.md). A
version is `Major.Minor.Patch`, as Azure Compute Gallery names image versions (Azure CLI reference, `az sig
image-version create --gallery-image-version`: "The allowed characters are digit and period. Digits must be within
the range of a 32-bit integer, e.g. <MajorVersion>.<MinorVersion>.<Patch>").
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from gpucluster.spec.base import SpecModel

ImageDefinitionName = Literal["gpu", "rack", "cpu", "confidential", "apiserver", "etcd"]
VERSION_PATTERN = r"^(0|[1-9]\d{0,9})\.(0|[1-9]\d{0,9})\.(0|[1-9]\d{0,9})$"
INT32_MAX = 2**31 - 1


class NodeImageSpec(SpecModel):
    definition: ImageDefinitionName | None = None
    """The gallery image definition; defaults to the one the pool's kind or the role needs."""
    version: str | None = Field(default=None, pattern=VERSION_PATTERN)
    """The image version the machines boot; defaults to the version this stack builds (`cluster.images`). Another
    version must already be in the cluster's gallery (built earlier). Changing it is a reviewed change: new
    instances boot it, running ones keep theirs (docs/images.md, "Rolling out a new version")."""

    @field_validator("version")
    @classmethod
    def _int32(cls, version: str | None) -> str | None:
        return check_version(version)


def check_version(version: str | None) -> str | None:
    if version is not None and any(int(part) > INT32_MAX for part in version.split(".")):
        raise ValueError(f"{version}: each part of an image version must be at most {INT32_MAX} (a 32-bit integer)")
    return version


class ImageBuildSpec(SpecModel):
    version: str | None = Field(default=None, pattern=VERSION_PATTERN)
    """The version this stack builds from the repository's bake scripts now; defaults to the catalogue's
    (components/catalog/node_images.py). Any change to what the bake puts in the image (scripts, pins, the
    Kubernetes version) needs a new version: a gallery image version is built once."""

    @field_validator("version")
    @classmethod
    def _int32(cls, version: str | None) -> str | None:
        return check_version(version)


class ImagesSpec(SpecModel):
    """`cluster.images`: the version of each node image this stack builds (docs/images.md)."""

    gpu: ImageBuildSpec = ImageBuildSpec()
    rack: ImageBuildSpec = ImageBuildSpec()
    """The Arm64 image of NVLink rack pools (docs/rack-scale.md)."""
    cpu: ImageBuildSpec = ImageBuildSpec()
    confidential: ImageBuildSpec = ImageBuildSpec()
    apiserver: ImageBuildSpec = ImageBuildSpec()
    etcd: ImageBuildSpec = ImageBuildSpec()
