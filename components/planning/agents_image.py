"""The project's own agents image (health checks, prefix IPAM): built from images/agents/Dockerfile with the
scripts in components/kubernetes/scripts/ as its build context, tagged by the content it is built from."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "images" / "agents" / "Dockerfile"
CONTEXT = ROOT / "components" / "kubernetes" / "scripts"
SCRIPTS = ("health_agent.py", "kube_client.py", "prefix_ipam.py", "rollout.py")
"""Copied side by side into /opt/gpucluster: the two agents import kube_client from their own directory."""
REPOSITORY = "gpucluster/agents"
VERSION = "1"
"""Bumped by hand for a change the content hash cannot see (none so far)."""
BASE_ARG = "BASE_IMAGE"


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
