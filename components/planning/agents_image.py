"""The project's own agents image (health checks, prefix IPAM): built from agents/Dockerfile with the
scripts in agents/ as its build context, tagged by the content it is built from."""

from __future__ import annotations

import base64
import gzip
import hashlib
import io
import re
import tarfile
from collections.abc import Iterable
from pathlib import Path

from gpucluster.catalog.image_platforms import AMD64, ARM64, node_platform

PACKAGE = Path(__file__).parents[1]
"""The package's folder (not resolved: in the project it is the `gpucluster` link, and agents/ a link in it)."""
CONTEXT = PACKAGE / "agents"
"""The build context: agents/ in the project (the agents and their Dockerfile), shipped as gpucluster/agents/
(pyproject.toml)."""
DOCKERFILE = CONTEXT / "Dockerfile"
SCRIPTS = ("health_agent.py", "kube_client.py", "prefix_ipam.py", "rack_clique.py", "rollout.py", "rollout_arm.py",
           "rollout_drain.py")
"""Copied side by side into /opt/gpucluster (the Dockerfile's COPY line): the agents import kube_client from their own
directory."""
REPOSITORY = "gpucluster/agents"
VERSION = "1"
"""Bumped by hand for a change the content hash cannot see (none so far)."""
BASE_ARG = "BASE_IMAGE"


def platforms(vm_sizes: Iterable[str]) -> tuple[str, ...]:
    """The platforms the agents image is built for: arm64 too wherever any machine of the cluster is arm64 (its
    health checks run on every GPU pool, GB300 racks included). The registry's build honours this
    (components/azure/registry.py)."""
    return (AMD64, ARM64) if any(node_platform(s) == ARM64 for s in vm_sizes) else (AMD64,)


def base_image() -> str:
    """The upstream base image the Dockerfile names as its `BASE_IMAGE` default (the build passes it served)."""
    match = re.search(rf"^ARG {BASE_ARG}=(\S+)$", DOCKERFILE.read_text(), re.MULTILINE)
    if match is None:
        raise ValueError(f"{DOCKERFILE}: no `ARG {BASE_ARG}=<image>` line")
    return match.group(1)


def content_tag() -> str:
    """`<version>-<12 hex>` of the Dockerfile and every script it copies: a changed script is a new image."""
    digest = hashlib.sha256(DOCKERFILE.read_bytes())
    for script in SCRIPTS:
        digest.update(script.encode() + b"\0" + (CONTEXT / script).read_bytes())
    return f"{VERSION}-{digest.hexdigest()[:12]}"


def context_archive() -> str:
    """The build context as base64 of a gzipped tar: the Dockerfile and the scripts it copies, nothing else, with fixed
    owners, modes and times, so the same content gives the same text on every machine. The build command carries it
    in its environment instead of paths: a program run from another folder (a program of its own, the runner's fresh
    checkout) finds the same files, and a checkout's location is no input of the command."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.USTAR_FORMAT) as archive:
        for name, data in [("Dockerfile", DOCKERFILE.read_bytes()),
                           *((script, (CONTEXT / script).read_bytes()) for script in SCRIPTS)]:
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), 0o644, 0
            archive.addfile(info, io.BytesIO(data))
    return base64.b64encode(gzip.compress(raw.getvalue(), compresslevel=9, mtime=0)).decode()


TASK_FILE = "acr-task.yaml"
TASK_VERSION = "v1.1.0"
"""The ACR Tasks YAML format version of Microsoft's multi-architecture example (azure-docs articles/container-registry/
push-multi-architecture-images.md, "Build and push a multi-arch image": `build` per architecture, `push`, then
`docker manifest create` and `docker manifest push --purge` as `cmd` steps)."""


def task_yaml(repository: str, tag: str, base_image: str, targets: tuple[str, ...]) -> str:
    """The ACR multi-step task that builds the image on the registry's agent pool and pushes it: one `build` per
    platform (`docker build --platform`: the Dockerfile only copies files, so no step runs a foreign binary and no
    emulator is needed), then a manifest list under the tag when there is more than one. `{{.Run.Registry}}` is the
    registry's login server (container-registry-tasks-reference-yaml.md, "Run variables")."""
    image = f"{{{{.Run.Registry}}}}/{repository}:{tag}"
    build = f"--build-arg {BASE_ARG}={base_image} --file Dockerfile ."
    lines = [f"version: {TASK_VERSION}", "steps:"]
    if len(targets) == 1:
        lines += [f"  - build: -t {image} --platform {targets[0]} {build}", f"  - push: ['{image}']"]
        return "\n".join(lines) + "\n"
    arch = {p: f"{image}-{p.rsplit('/', 1)[-1]}" for p in targets}
    lines += [f"  - build: -t {arch[p]} --platform {p} {build}" for p in targets]
    lines += ["  - push:", *(f"      - '{arch[p]}'" for p in targets)]
    lines += [f"  - cmd: docker manifest create {image} {' '.join(arch[p] for p in targets)}",
              f"  - cmd: docker manifest push --purge {image}"]
    return "\n".join(lines) + "\n"
