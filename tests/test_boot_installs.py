"""Boot documents only configure: no document in `out/<stack>/boot/` installs software. Packages, drivers, binaries
and container images are in the node images (docs/images.md); a boot that installed them would reach the mirrors
from thousands of machines at once and fail on conflicts the image's own packages declare (tests/test_bake_apt.py).

The detector is checked against what the boot documents ran before the images, so it cannot pass by being blind.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gpucluster.offline.boot_docs import BOOT_DIR, write_boot_documents
from gpucluster.planning.cluster_plan import plan_cluster
from tests.support.stacks import stack_spec

INSTALLS = {
    "apt": re.compile(r"\bapt(-get)?\b[^\n]*\b(install|upgrade|full-upgrade|dist-upgrade|update)\b"),
    "dpkg": re.compile(r"\bdpkg\s+(-i|--install|--unpack)\b"),
    "pip": re.compile(r"\b(pip3?|python3?\s+-m\s+pip)\b[^\n]*\binstall\b"),
    "snap": re.compile(r"\bsnap\s+install\b"),
    "curl|sh": re.compile(r"\b(curl|wget)\b[^\n|]*\|\s*(sudo\s+)?(ba)?sh\b"),
    "unpacked binary": re.compile(r"\btar\b[^\n]*-x[^\n]*-C\s+/usr(/local)?/s?bin\b"),
    "apt key": re.compile(r"\bgpg\b[^\n]*--dearmor\b"),
    "apt source": re.compile(r"/etc/apt/sources\.list"),
}

BEFORE_THE_IMAGES = {  # lines the boot documents carried at commit 7a0fb62, one per kind the detector must see
    "apt": "apt-get -o DPkg::Lock::Timeout=600 -o Acquire::Retries=5 -y install apt-transport-https containerd",
    "pip": "/opt/gpucluster/gpu-verifier/bin/pip install --quiet --retries 10 nv-local-gpu-verifier==2.7.3",
    "unpacked binary": "tar -xzf /tmp/etcd.tar.gz -C /usr/local/bin --strip-components=1 '*/etcd'",
    "apt key": "gpg --batch --yes --dearmor -o /etc/apt/keyrings/kubernetes-apt-keyring.gpg /tmp/kubernetes-release.key",
    "apt source": "echo 'deb https://pkgs.k8s.io/core:/stable:/v1.36/deb/ /' > /etc/apt/sources.list.d/kubernetes.list",
    "curl|sh": "curl -fsSL https://example.invalid/install.sh | sh",
    "dpkg": "dpkg -i /tmp/cuda-keyring.deb",
}


def installs(text: str) -> list[str]:
    return [f"{kind}: {line.strip()}" for line in text.splitlines() for kind, pattern in INSTALLS.items()
            if pattern.search(line.split("#", 1)[0])]


@pytest.mark.parametrize(("kind", "line"), sorted(BEFORE_THE_IMAGES.items()))
def test_the_detector_finds_what_the_boot_documents_used_to_install(kind: str, line: str) -> None:
    assert installs(line) and installs(line)[0].startswith(kind)


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_no_boot_document_installs_software(tmp_path: Path, stack: str) -> None:
    """Every file `gpucluster plan` writes to out/<stack>/boot/, as written."""
    count = write_boot_documents(plan_cluster(stack_spec(stack)), tmp_path)
    documents = sorted((tmp_path / BOOT_DIR).glob("*.yaml"))
    assert len(documents) == count >= 9
    found = {d.name: installs(d.read_text()) for d in documents}
    assert not any(found.values()), {name: lines for name, lines in found.items() if lines}
