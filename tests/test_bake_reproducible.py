"""Bakes that give the same image from the same stack (images/lib/bake.sh, images/gpu/bake.sh): Ubuntu's archive read
at the catalogue's snapshot, NVIDIA's driver packages from Ubuntu's archive whatever NVIDIA's repository offers, the
driver, its modules, the fabric manager and the CUDA toolkits checked against each other, and no containerd drop-in
but the image's own.

The functions run unchanged from the bundle, against a root folder (`ROOT`) holding the base image's files, with
stand-ins on PATH only for what reads the build VM itself (`dpkg-query` for installed versions, `modinfo`). apt's
pinning runs through the real apt (Debian's, here) over two file repositories with the origins Ubuntu's and NVIDIA's
Release files state; apt 2.6 ignores a `snapshot=` option it does not know, so what a marked sources file does on
22.04 (apt 2.4.11+) is the snapshot service's documented behaviour, not shown here: the bake checks it on the build
VM (`require_snapshot_version`, tests/test_bake_apt.py).
"""

from __future__ import annotations

import hashlib
import io
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

from gpucluster.bake.bundle import bake_bundle
from gpucluster.catalog.node_images import NVIDIA_BRANCH, UBUNTU_SNAPSHOT

APT_GET = shutil.which("apt-get")
DRIVER = "580.95.05"
AZURE_JAMMY = """\
deb http://azure.archive.ubuntu.com/ubuntu/ jammy main restricted
deb-src http://azure.archive.ubuntu.com/ubuntu/ jammy main restricted
deb [arch=amd64] http://azure.archive.ubuntu.com/ubuntu/ jammy-updates main restricted
deb http://azure.archive.ubuntu.com/ubuntu/ jammy-security main restricted
# deb http://archive.canonical.com/ubuntu jammy partner
deb [arch=amd64 signed-by=/usr/share/keyrings/microsoft-prod.gpg] https://packages.microsoft.com/ubuntu/22.04/prod jammy main
deb [snapshot=no] http://security.ubuntu.com/ubuntu jammy-security universe
"""
"""Sources as Azure's Ubuntu 22.04 images write them (the azure.archive.ubuntu.com mirror), with a deb-src line, one
that carries options, a comment, a third-party repository and one already saying what it wants."""


def _bundle(tmp_path: Path, definition: str) -> Path:
    target = tmp_path / "bundle"
    with tarfile.open(fileobj=io.BytesIO(bake_bundle(definition, "1.0.0", "1.36.4").archive())) as tar:
        tar.extractall(target)
    return target


def _tool(folder: Path, name: str, script: str) -> None:
    folder.mkdir(exist_ok=True)
    (folder / name).write_text(f"#!/bin/bash\n{script}\n")
    (folder / name).chmod(0o755)


def _installed(versions: dict[str, str]) -> str:
    """A dpkg-query stand-in answering `-W -f='${Version}' <package>` from `versions` (exit 1 when not installed)."""
    cases = "".join(f'  "{package}") echo -n "{version}" ;;\n' for package, version in versions.items())
    return f'case "${{@: -1}}" in\n{cases}  *) exit 1 ;;\nesac'


def _run(bundle: Path, definition: str, root: Path, tools: Path, steps: str) -> subprocess.CompletedProcess[str]:
    script = f"set -euo pipefail\n. {bundle}/{definition}/bake.sh\n{steps}\n"
    return subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60,
                          env={"PATH": f"{tools}:/usr/bin:/bin", "ROOT": str(root), "LC_ALL": "C"})


def _root(tmp_path: Path, codename: str, sources: str = AZURE_JAMMY) -> Path:
    root = tmp_path / "root"
    (root / "etc" / "apt" / "apt.conf.d").mkdir(parents=True)
    (root / "etc" / "apt" / "sources.list.d").mkdir()
    (root / "etc" / "os-release").write_text(f"NAME=\"Ubuntu\"\nVERSION_CODENAME={codename}\n")
    (root / "etc" / "apt" / "sources.list").write_text(sources)
    return root


def test_jammy_reads_ubuntus_archive_at_the_snapshot(tmp_path: Path) -> None:
    root, tools = _root(tmp_path, "jammy"), tmp_path / "bin"
    _tool(tools, "dpkg-query", _installed({"apt": "2.4.13"}))
    result = _run(_bundle(tmp_path, "cpu"), "cpu", root, tools, "use_ubuntu_snapshot; use_ubuntu_snapshot")
    assert result.returncode == 0, result.stderr
    assert (root / "etc/apt/apt.conf.d/50gpucluster-snapshot").read_text() == f'APT::Snapshot "{UBUNTU_SNAPSHOT}";\n'
    assert (root / "etc/apt/sources.list").read_text().splitlines() == [
        "deb [snapshot=yes] http://azure.archive.ubuntu.com/ubuntu/ jammy main restricted",
        "deb-src [snapshot=yes] http://azure.archive.ubuntu.com/ubuntu/ jammy main restricted",
        "deb [arch=amd64 snapshot=yes] http://azure.archive.ubuntu.com/ubuntu/ jammy-updates main restricted",
        "deb [snapshot=yes] http://azure.archive.ubuntu.com/ubuntu/ jammy-security main restricted",
        "# deb http://archive.canonical.com/ubuntu jammy partner",
        "deb [arch=amd64 signed-by=/usr/share/keyrings/microsoft-prod.gpg] https://packages.microsoft.com/ubuntu/22.04/prod"
        " jammy main",
        "deb [snapshot=no] http://security.ubuntu.com/ubuntu jammy-security universe",
    ]  # marked once, however often the step runs


@pytest.mark.skipif(APT_GET is None, reason="apt-get is not installed")
def test_marked_sources_still_parse(tmp_path: Path) -> None:
    """The marked line as a real apt reads it (an apt that knows no `snapshot=` ignores it; 2.4.11+ uses it)."""
    root, tools = _root(tmp_path, "jammy", "deb [trusted=yes] http://archive.ubuntu.com/ubuntu/ jammy main\n"), \
        tmp_path / "bin"
    _tool(tools, "dpkg-query", _installed({"apt": "2.4.11"}))
    assert _run(_bundle(tmp_path, "cpu"), "cpu", root, tools, "mark_snapshot_sources").returncode == 0
    listed = subprocess.run([str(APT_GET), "-o", f"Dir::Etc::SourceList={root}/etc/apt/sources.list",
                             "-o", "Dir::Etc::SourceParts=/nonexistent", "indextargets", "--format", "$(SITE)"],
                            capture_output=True, text=True, timeout=60)
    assert listed.returncode == 0 and "E:" not in listed.stderr, listed.stderr


def test_an_apt_without_snapshots_stops_the_bake(tmp_path: Path) -> None:
    root, tools = _root(tmp_path, "jammy"), tmp_path / "bin"
    _tool(tools, "dpkg-query", _installed({"apt": "2.4.10"}))
    result = _run(_bundle(tmp_path, "cpu"), "cpu", root, tools, "use_ubuntu_snapshot")
    assert result.returncode == 1 and "apt 2.4.10 cannot read Ubuntu's snapshot service" in result.stderr
    assert (root / "etc/apt/sources.list").read_text() == AZURE_JAMMY


def test_noble_leaves_its_sources_to_apt_and_an_unknown_release_stops(tmp_path: Path) -> None:
    tools = tmp_path / "bin"
    _tool(tools, "dpkg-query", _installed({"apt": "2.7.14"}))
    noble = _root(tmp_path / "noble", "noble")
    assert _run(_bundle(tmp_path, "rack"), "rack", noble, tools, "use_ubuntu_snapshot").returncode == 0
    assert (noble / "etc/apt/sources.list").read_text() == AZURE_JAMMY  # apt 2.7 detects snapshots itself
    assert UBUNTU_SNAPSHOT in (noble / "etc/apt/apt.conf.d/50gpucluster-snapshot").read_text()
    other = _root(tmp_path / "plucky", "plucky")
    result = _run(_bundle(tmp_path, "rack"), "rack", other, tools, "use_ubuntu_snapshot")
    assert result.returncode == 1 and "no snapshot rule for Ubuntu plucky" in result.stderr


def _apt(root: Path) -> list[str]:
    return [str(APT_GET).replace("apt-get", "apt-cache"), "-o", f"Dir::Etc::SourceList={root}/sources.list",
            "-o", "Dir::Etc::SourceParts=/nonexistent", "-o", f"Dir::State::Lists={root}/lists",
            "-o", f"Dir::Cache={root}/cache", "-o", f"Dir::State::status={root}/status",
            "-o", f"Dir::Etc::Preferences={root}/etc/apt/preferences",
            "-o", f"Dir::Etc::PreferencesParts={root}/etc/apt/preferences.d", "-o", "Debug::NoLocking=1"]


def _repository(folder: Path, origin: str, version: str) -> None:
    folder.mkdir(parents=True)
    packages = (f"Package: nvidia-fabricmanager-{NVIDIA_BRANCH}\nVersion: {version}\nArchitecture: amd64\n"
                f"Filename: pool/fm.deb\nSize: 1\nDescription: fabric manager\n")
    (folder / "Packages").write_text(packages)
    digest = hashlib.sha256(packages.encode()).hexdigest()
    (folder / "Release").write_text(f"Origin: {origin}\nLabel: {origin}\nSuite: stable\nDate: Mon, 23 Nov 2026 "
                                    f"10:56:49 UTC\nSHA256:\n {digest} {len(packages)} Packages\n")


@pytest.mark.skipif(APT_GET is None, reason="apt-get is not installed")
def test_the_driver_packages_come_from_ubuntu_whatever_nvidias_repository_offers(tmp_path: Path) -> None:
    """Two repositories offer the fabric manager, Ubuntu's at the driver's version and NVIDIA's CUDA repository at
    a newer one (versions made up for the test; the Release files' Origin as each archive states it): apt takes
    NVIDIA's newer build until the GPU bake's preferences file is in place, then Ubuntu's."""
    root = tmp_path / "apt"
    _repository(root / "ubuntu", "Ubuntu", f"{DRIVER}-0ubuntu0.22.04.1")
    _repository(root / "cuda", "NVIDIA", "580.105.08-1")
    for folder in ("lists/partial", "cache/archives/partial", "etc/apt/preferences.d"):
        (root / folder).mkdir(parents=True)
    (root / "status").write_text("")
    (root / "sources.list").write_text(f"deb [trusted=yes] file:{root}/ubuntu ./\ndeb [trusted=yes] file:{root}/cuda ./\n")
    update = subprocess.run([str(APT_GET), *_apt(root)[1:], "update"], capture_output=True, text=True, timeout=60)
    assert update.returncode == 0, update.stderr

    def candidate() -> str:
        policy = subprocess.run([*_apt(root), "policy", f"nvidia-fabricmanager-{NVIDIA_BRANCH}"], capture_output=True,
                                text=True, timeout=60).stdout
        return next(line.split(": ", 1)[1] for line in policy.splitlines() if "Candidate:" in line)

    assert candidate() == "580.105.08-1"
    result = _run(_bundle(tmp_path, "gpu"), "gpu", root, tmp_path / "bin", "prefer_ubuntu_nvidia_packages")
    assert result.returncode == 0, result.stderr
    assert candidate() == f"{DRIVER}-0ubuntu0.22.04.1"


def _gpu_machine(tmp_path: Path, fabric: str, module: str, cuda: tuple[str, ...] = ("12.4.1",)) -> tuple[Path, Path]:
    root, tools = tmp_path / "root", tmp_path / "bin"
    (root / "boot").mkdir(parents=True)
    for kernel in ("5.15.0-1073-azure", "5.15.0-1075-azure"):
        (root / "boot" / f"vmlinuz-{kernel}").write_text("")
    for version in cuda:
        folder = root / "usr" / "local" / f"cuda-{version.rsplit('.', 1)[0]}"
        folder.mkdir(parents=True)
        (folder / "version.json").write_text(f'{{"cuda": {{"name": "CUDA SDK", "version": "{version}"}}}}')
    _tool(tools, "dpkg-query", _installed({f"nvidia-kernel-common-{NVIDIA_BRANCH}-server": f"{DRIVER}-0ubuntu0.22.04.1",
                                           f"nvidia-fabricmanager-{NVIDIA_BRANCH}": fabric}))
    _tool(tools, "modinfo", f'echo "{module}"')
    return root, tools


def test_a_driver_stack_that_agrees_passes(tmp_path: Path) -> None:
    root, tools = _gpu_machine(tmp_path, f"{DRIVER}-0ubuntu0.22.04.2", DRIVER, ("12.4.1", "13.0.2"))
    result = _run(_bundle(tmp_path, "gpu"), "gpu", root, tools, "check_gpu_versions")
    assert result.returncode == 0, result.stderr
    assert f"driver {DRIVER}: modules, fabric manager and CUDA toolkits agree" in result.stdout


@pytest.mark.parametrize(("fabric", "module", "cuda", "message"), [
    ("1:580.105.08-1", DRIVER, "12.4.1", "nvidia-fabricmanager-580 is 580.105.08 but the driver is 580.95.05"),
    (f"{DRIVER}-0ubuntu0.22.04.1", "560.35.03", "12.4.1",
     "kernel 5.15.0-1073-azure's nvidia module is 560.35.03 but the driver is 580.95.05"),
    (f"{DRIVER}-0ubuntu0.22.04.1", DRIVER, "14.0.0", "no driver minimum known for CUDA 14"),
])
def test_a_driver_stack_that_disagrees_stops_the_bake(tmp_path: Path, fabric: str, module: str, cuda: str,
                                                       message: str) -> None:
    root, tools = _gpu_machine(tmp_path, fabric, module, (cuda,))
    result = _run(_bundle(tmp_path, "gpu"), "gpu", root, tools, "check_gpu_versions")
    assert result.returncode == 1 and message in result.stderr, result.stderr


def test_a_cuda_toolkit_newer_than_the_drivers_branch_stops_the_bake(tmp_path: Path) -> None:
    root, tools = _gpu_machine(tmp_path, f"{DRIVER}-0ubuntu0.22.04.1", DRIVER, ("13.0.2",))
    bundle = _bundle(tmp_path, "gpu")
    pins = (bundle / "pins.env").read_text().replace("13:580", "13:590")
    (bundle / "pins.env").write_text(pins)
    result = _run(bundle, "gpu", root, tools, "check_gpu_versions")
    assert result.returncode == 1 and "CUDA 13.0.2 needs driver branch 590 or later" in result.stderr


def test_only_the_images_own_containerd_drop_ins_remain(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "etc" / "containerd" / "conf.d").mkdir(parents=True)
    (root / "etc" / "containerd" / "conf.d" / "99-nvidia.toml").write_text("version = 3\n")
    (root / "etc" / "containerd" / "conf.d" / "README").write_text("not a drop-in\n")
    result = _run(_bundle(tmp_path, "rack"), "rack", root, tmp_path / "bin", "clear_containerd_drop_ins")
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in (root / "etc" / "containerd" / "conf.d").iterdir()) == ["README"]
    assert "removing the base image's containerd drop-in /etc/containerd/conf.d/99-nvidia.toml" in result.stdout


def test_the_pins_carry_the_snapshot_and_the_cuda_minimums() -> None:
    pins = dict(line.split("=", 1) for line in bake_bundle("gpu", "1.0.0", "1.36.4").files["pins.env"][1].decode()
                .splitlines())
    assert pins["UBUNTU_SNAPSHOT"] == f"'{UBUNTU_SNAPSHOT}'" and pins["CUDA_DRIVER_MINIMUMS"] == "'11:450 12:525 13:580'"
