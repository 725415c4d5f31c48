"""The bake bundle: what Azure VM Image Builder unpacks on its build VM and runs, as one deterministic tar.gz.

It holds images/lib/bake.sh, images/<definition>/bake.sh, `pins.env` (versions from the plan and the catalogue),
`prepull.txt`, `files.txt` and `files/` (components/bake/content.py), and `package-files.txt` (what documents and
units name from packages). The same bytes for the same plan, so the image template changes only when what it bakes
changes, and its sha256 names the build (docs/images.md).
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import io
import tarfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from gpucluster.bake.content import image_files
from gpucluster.bootstrap.confidential import GATE_UNIT, GPU_VERIFIER_VERSION
from gpucluster.bootstrap.host_prep import SYSCTL_FILE
from gpucluster.catalog.node_images import (
    ACR_CREDENTIAL_PROVIDER,
    CONTAINERD,
    CUDA_DRIVER_MINIMUMS,
    DEBIAN_ARCH,
    NODE_IMAGES,
    NVIDIA_BRANCH,
    UBUNTU_SNAPSHOT,
    etcd_version,
    package_files,
    prepull_images,
)
from gpucluster.catalog.versions import minor_of

IMAGES_DIR = Path(__file__).parents[1] / "image_sources"
"""The bake scripts: images/lib and images/<definition> in the project, shipped in the package as
gpucluster/image_sources/ (a link to images/, pyproject.toml)."""
BUNDLE_DIR = "/tmp/gpucluster-bake"


@dataclass(frozen=True)
class Bundle:
    definition: str
    version: str
    files: dict[str, tuple[int, bytes]]
    """Path in the bundle -> (mode, bytes)."""

    def archive(self) -> bytes:
        """A tar.gz with sorted entries, no owners and no times: byte-identical for the same files."""
        raw = io.BytesIO()
        with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
            for path, (mode, content) in sorted(self.files.items()):
                info = tarfile.TarInfo(path)
                info.size, info.mode, info.mtime = len(content), mode, 0
                info.uid = info.gid = 0
                info.uname = info.gname = "root"
                tar.addfile(info, io.BytesIO(content))
        packed = io.BytesIO()
        with gzip.GzipFile(fileobj=packed, mode="wb", mtime=0, compresslevel=9) as out:
            out.write(raw.getvalue())
        return packed.getvalue()

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.archive()).hexdigest()

    def inline_commands(self) -> list[str]:
        """Image Builder's Shell customizer `inline` (Packer's shell provisioner, run with /bin/sh -e as the build
        user): unpack the bundle and run the definition's bake as root."""
        encoded = base64.b64encode(self.archive()).decode()
        return [
            f"rm -rf {BUNDLE_DIR}",
            f"mkdir -p {BUNDLE_DIR}",
            f"echo '{encoded}' | base64 -d | tar -xz -C {BUNDLE_DIR}",
            f"sudo env BUNDLE_SHA256={self.sha256} bash {BUNDLE_DIR}/{self.definition}/bake.sh",
            f"rm -rf {BUNDLE_DIR}",
        ]


def pins(definition: str, version: str, kubernetes_version: str) -> dict[str, str]:
    """What the bake installs, at which version (images/lib/bake.sh reads pins.env)."""
    image = NODE_IMAGES[definition]
    provider = ACR_CREDENTIAL_PROVIDER
    return {
        "ACR_PROVIDER_REPOSITORY": provider.repository,
        "ACR_PROVIDER_TAG": provider.tag,
        "ACR_PROVIDER_ASSET": provider.asset_for(DEBIAN_ARCH[image.architecture]),
        "ACR_PROVIDER_PATH": provider.path,
        "IMAGE_DEFINITION": definition,
        "IMAGE_VERSION": version,
        "KUBERNETES_VERSION": kubernetes_version,
        "KUBERNETES_MINOR": minor_of(kubernetes_version),
        "CONTAINERD_VERSION": CONTAINERD[image.ubuntu],
        "NVIDIA_BRANCH": NVIDIA_BRANCH,
        "UBUNTU_SNAPSHOT": UBUNTU_SNAPSHOT,
        "CUDA_DRIVER_MINIMUMS": " ".join(f"{cuda}:{branch}" for cuda, branch in sorted(CUDA_DRIVER_MINIMUMS.items())),
        "ETCD_VERSION": etcd_version(kubernetes_version),
        "GPU_VERIFIER_VERSION": GPU_VERIFIER_VERSION,
        "SYSCTL_FILE": SYSCTL_FILE,
        "CC_GATE_UNIT": GATE_UNIT,
    }


def bake_bundle(definition: str, version: str, kubernetes_version: str,
                serve: Callable[[str], str] | None = None) -> Bundle:
    """`serve`: the name the cluster's manifests use for an upstream image (RegistryPlan.serve). Each prepull.txt
    line is `<upstream> <served>`: the bake pulls the upstream image and tags it with the served name, so the kubelet
    (imagePullPolicy IfNotPresent) finds it under the reference its pods name."""
    files: dict[str, tuple[int, bytes]] = {
        "lib/bake.sh": (0o644, (IMAGES_DIR / "lib" / "bake.sh").read_bytes()),
        f"{definition}/bake.sh": (0o755, (IMAGES_DIR / definition / "bake.sh").read_bytes()),
        "pins.env": (0o644, "".join(f"{k}='{v}'\n" for k, v in pins(definition, version, kubernetes_version).items())
                     .encode()),
        "prepull.txt": (0o644, "".join(f"{i} {(serve or str)(i)}\n"
                                       for i in prepull_images(definition, kubernetes_version)).encode()),
    }
    listing = []
    for f in image_files(definition):
        files[f"files{f.path}"] = (int(f.mode, 8), f.content.encode())
        listing.append(f"{f.mode} {f.path}\n")
    files["files.txt"] = (0o644, "".join(listing).encode())
    files["package-files.txt"] = (0o644, "".join(f"{path} {p.package}\n" for p in package_files(definition)
                                                 for path in p.files).encode())
    return Bundle(definition, version, files)
