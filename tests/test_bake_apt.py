"""The bake scripts' package transactions through apt's own resolver (`apt-get -s`), against a dpkg status of the
base image and a file:// repository of the real control stanzas of what they install (tests/data/apt/stanzas.yaml,
each stanza with its source).

The bake's functions run unchanged from the bundle Image Builder would run (components/bake/bundle.py): only
`apt-get`, `apt-mark` and `dpkg-query` on PATH are stand-ins, which run the real apt-get in simulation mode (and,
after a simulated purge, drop the purged packages from the status, as dpkg would), record holds, and query the
test's dpkg status. Skipped only where apt-get is not installed.

The conflict (Azure/azhpc-images at tag ubuntu-hpc-20241023 installs moby-engine; Azure/moby-packaging's
moby-containerd and moby-runc declare Provides/Conflicts/Replaces containerd, containerd.io and runc): Ubuntu's
`containerd` cannot be installed beside them. What the boot documents ran before the images (today's line below)
either tears out the image's container engine or, where an install may not remove anything, exits 100. The bake
removes moby's packages in a transaction of its own, then installs with `--no-remove`.

The confidential image's kernel modules: the rolling `-azure-fde` meta brings the archive's newest kernel and leaves
the base kernel without a module (the bake's own check stops it); the bake takes the modules for the base kernel's
ABI. Not simulated here, because the fields of their dependency closures could not be read offline: the GPU image's
driver transaction (nvidia-driver-580-server-open and its ~20 library packages) and the rest of the confidential
image's (Ubuntu 24.04) transactions. The etcd image makes no apt transaction at all.
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import yaml

from gpucluster.bake.bundle import bake_bundle
from gpucluster.catalog.node_images import UBUNTU_SNAPSHOT

APT_GET = shutil.which("apt-get")
DPKG_QUERY = shutil.which("dpkg-query")
pytestmark = pytest.mark.skipif(APT_GET is None or DPKG_QUERY is None, reason="apt-get is not installed")

STANZAS = yaml.safe_load((Path(__file__).parent / "data" / "apt" / "stanzas.yaml").read_text())
KUBERNETES = "1.36.4"

# What components/bootstrap/node.py `install_script("1.36.4")` ran at every node's boot before the node images
# (commit 7a0fb62): the two install lines, with the options they carried.
TODAY_APT = ["-o", "DPkg::Lock::Timeout=600", "-o", "Acquire::Retries=5", "-y"]
TODAY_LINES = [["install", "apt-transport-https", "ca-certificates", "curl", "gpg", "containerd"],
               ["install", f"kubelet={KUBERNETES}-*", f"kubeadm={KUBERNETES}-*"]]

APT_STAND_IN = '''#!{python}
"""apt-get in simulation mode against the test's status; a simulated purge is applied to the status."""
import os, re, subprocess, sys
simulate = [] if "update" in sys.argv[1:] else ["-s"]
result = subprocess.run([{apt!r}, *simulate, *sys.argv[1:]], capture_output=True, text=True)
sys.stdout.write(result.stdout)
sys.stderr.write(result.stderr)
with open(os.environ["APT_LOG"], "a") as log:
    log.write(" ".join(sys.argv[1:]) + "\\n" + result.stdout + result.stderr + f"exit {{result.returncode}}\\n")
if result.returncode == 0 and ({{"purge", "remove"}} & set(sys.argv[1:])):
    gone = set(re.findall(r"^(?:Purg|Remv) (\\S+)", result.stdout, re.M))
    status = os.environ["STATUS_FILE"]
    stanzas = open(status).read().strip().split("\\n\\n")
    kept = [s for s in stanzas if s.split("\\n", 1)[0].split(": ", 1)[1] not in gone]
    open(status, "w").write("\\n\\n".join(kept) + "\\n\\n")
sys.exit(result.returncode)
'''


def _stanza(fields: dict[str, str], installed: bool) -> str:
    lines = {"Package": fields["Package"]}
    if installed:
        lines["Status"] = "install ok installed"
    lines |= {"Architecture": fields.get("Architecture", "amd64"), "Version": str(fields["Version"])}
    for key in ("Depends", "Recommends", "Suggests", "Conflicts", "Breaks", "Replaces", "Provides"):
        if key in fields:
            lines[key] = fields[key]
    if not installed:
        name = f"pool/{fields['Package']}_{fields['Version']}.deb".replace("~", "_").replace(":", "_")
        lines |= {"Filename": name, "Size": "1"}
    lines["Description"] = fields["Package"]
    return "".join(f"{k}: {v}\n" for k, v in lines.items())


class Machine:
    """A base image as apt sees it: its dpkg status and the repositories its bake reaches."""

    def __init__(self, root: Path, base: str, repositories: list[str], archive: str = "snapshot",
                 without: tuple[tuple[str, str], ...] = ()) -> None:
        """`archive`: "snapshot" serves the repository from a path holding Ubuntu's snapshot URL
        (snapshot.ubuntu.com/ubuntu/<UBUNTU_SNAPSHOT>), as apt names the snapshot's packages once it reads it
        (images/lib/bake.sh `require_snapshot_version` looks for that host); "live" from the archive's own.
        `without`: (package, version) stanzas left out of the repository."""
        self.root = root
        admin = root / "dpkg"
        (admin / "info").mkdir(parents=True)
        (admin / "updates").mkdir()
        self.status = admin / "status"
        self.status.write_text("\n".join(_stanza(s, True) for s in STANZAS["status"][base]) + "\n")
        repo = root / ("snapshot.ubuntu.com/ubuntu/" + UBUNTU_SNAPSHOT if archive == "snapshot" else "archive.ubuntu.com/ubuntu")
        repo.mkdir(parents=True)
        (repo / "Packages").write_text("\n".join(_stanza(s, False) for r in repositories for s in STANZAS["repositories"][r]
                                                 if (s["Package"], str(s["Version"])) not in without))
        for sub in ("lists/partial", "cache/archives/partial", "etc/apt.conf.d", "etc/preferences.d",
                    "etc/sources.list.d"):
            (root / sub).mkdir(parents=True)
        (root / "etc" / "sources.list").write_text(f"deb [trusted=yes] file:{repo} ./\n")
        (root / "apt.conf").write_text("".join(f'{k} "{v}";\n' for k, v in {
            "Dir::State::status": self.status, "Dir::State::Lists": root / "lists", "Dir::Cache": root / "cache",
            "Dir::Etc::SourceList": root / "etc" / "sources.list", "Dir::Etc::SourceParts": root / "etc" / "sources.list.d",
            "Dir::Etc::Parts": root / "etc" / "apt.conf.d", "Dir::Etc::Preferences": root / "etc" / "preferences",
            "Dir::Etc::PreferencesParts": root / "etc" / "preferences.d", "APT::Architecture": "amd64",
            "Debug::NoLocking": "1", "APT::Sandbox::User": "root"}.items()))
        self.log = root / "apt.log"
        self.holds = root / "holds"
        self.bin = root / "bin"
        self.bin.mkdir()
        (self.bin / "apt-get").write_text(APT_STAND_IN.format(python=sys.executable, apt=APT_GET))
        (self.bin / "apt-mark").write_text(f'#!/bin/bash\necho "$*" >> {self.holds}\n')
        (self.bin / "dpkg-query").write_text(f'#!/bin/bash\nexec {DPKG_QUERY} --admindir={admin} "$@"\n')
        for tool in self.bin.iterdir():
            tool.chmod(0o755)
        update = self.apt("update")
        assert update.returncode == 0, update.stderr

    @property
    def env(self) -> dict[str, str]:
        return {"PATH": f"{self.bin}:/usr/bin:/bin", "APT_CONFIG": str(self.root / "apt.conf"),
                "APT_LOG": str(self.log), "STATUS_FILE": str(self.status), "LC_ALL": "C"}

    def apt(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(self.bin / "apt-get"), *args], capture_output=True, text=True, env=self.env,
                              timeout=120)

    def installed(self) -> set[str]:
        return {line.split(": ", 1)[1] for line in self.status.read_text().splitlines() if line.startswith("Package: ")}

    def bake(self, bundle_dir: Path, definition: str, steps: str) -> subprocess.CompletedProcess[str]:
        """Source the bundle's bake script (its main does not run when sourced) and run `steps`."""
        script = f'set -euo pipefail\n. {bundle_dir}/{definition}/bake.sh\n{steps}\n'
        return subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=self.env, timeout=300)


def _bundle(tmp_path: Path, definition: str) -> Path:
    target = tmp_path / "bundle"
    with tarfile.open(fileobj=io.BytesIO(bake_bundle(definition, "1.0.0", KUBERNETES).archive())) as tar:
        tar.extractall(target)
    return target


@pytest.fixture
def hpc(tmp_path: Path) -> Machine:
    return Machine(tmp_path / "hpc", "ubuntu-hpc-2204", ["jammy", "kubernetes-1.36"])


def test_todays_boot_install_tears_out_the_images_container_engine(hpc: Machine) -> None:
    """apt resolves Ubuntu's containerd against moby-containerd's `Conflicts: containerd` by removing
    moby-containerd, and with it moby-engine (Depends: moby-containerd): the boot took Docker off the image."""
    result = hpc.apt(*TODAY_APT, *TODAY_LINES[0])
    assert result.returncode == 0, result.stderr
    assert "Remv moby-containerd" in result.stdout and "Remv moby-engine" in result.stdout


def test_todays_boot_install_fails_where_an_install_may_not_remove(hpc: Machine) -> None:
    """The same line under the rule every image install follows (`--no-remove`: apt aborts "if any packages
    are to be removed", apt-get(8)) exits 100 on the conflict."""
    result = hpc.apt(*TODAY_APT, "--no-remove", *TODAY_LINES[0])
    assert result.returncode == 100
    assert "Packages need to be removed but remove is disabled" in result.stderr
    assert {"moby-containerd", "moby-engine"} <= hpc.installed()


def test_gpu_bake_removes_moby_then_installs_containerd_2_and_kubernetes(hpc: Machine, tmp_path: Path) -> None:
    bundle = _bundle(tmp_path, "gpu")
    result = hpc.bake(bundle, "gpu", 'remove_packages "${REMOVE_FIRST[@]}"\ninstall_kubernetes')
    assert result.returncode == 0, result.stdout + result.stderr
    log = hpc.log.read_text()
    assert "exit 100" not in log
    left = hpc.installed()
    assert not {p for p in left if p.startswith("moby-")}, left
    install = log[log.index("--no-remove install"):]
    for package in ("containerd (2.2.1-0ubuntu1~22.04.2", "runc (1.1.0-0ubuntu1", f"kubelet ({KUBERNETES}-1.1",
                    f"kubeadm ({KUBERNETES}-1.1", "kubernetes-cni (1.2.0-2.1"):
        assert f"Inst {package}" in install, install
    assert "hold containerd runc kubelet kubeadm" in hpc.holds.read_text()


@pytest.mark.parametrize("definition", ["cpu", "apiserver"])
def test_plain_ubuntu_bakes_install_containerd_2_and_kubernetes(tmp_path: Path, definition: str) -> None:
    machine = Machine(tmp_path / definition, "ubuntu-2204", ["jammy", "kubernetes-1.36"])
    bundle = _bundle(tmp_path, definition)
    result = machine.bake(bundle, definition, "install_kubernetes")
    assert result.returncode == 0, result.stdout + result.stderr
    log = machine.log.read_text()
    assert "Inst containerd (2.2.1-0ubuntu1~22.04.2" in log and f"Inst kubelet ({KUBERNETES}-1.1" in log


def test_bake_transactions_read_their_versions_from_the_plan(tmp_path: Path) -> None:
    """The pins come from pins.env, rendered from the plan: another Kubernetes patch asks apt for that one."""
    bundle = tmp_path / "b"
    with tarfile.open(fileobj=io.BytesIO(bake_bundle("cpu", "1.0.0", "1.35.9").archive())) as tar:
        tar.extractall(bundle)
    out = subprocess.run(["bash", "-c", f'. {bundle}/cpu/bake.sh; printf "%s\\n" "${{KUBERNETES_PACKAGES[@]}}"'],
                         capture_output=True, text=True, timeout=30, env={"PATH": os.environ["PATH"]})
    assert out.stdout.split() == ["containerd=2.2.1-0ubuntu1~22.04.2", "runc", "kubelet=1.35.9-*", "kubeadm=1.35.9-*"]


def test_etcd_bake_makes_no_apt_transaction() -> None:
    from gpucluster.bake.bundle import IMAGES_DIR

    script = (IMAGES_DIR / "etcd" / "bake.sh").read_text()
    assert "install_packages" not in script and "apt_" not in script and "install_kubernetes" not in script


KERNEL_APT = '''#!/bin/bash
# apt-get as above, then what dpkg would unpack that the bake's module check reads: each new kernel's /boot image, and
# the kernels the NVIDIA module packages are built for.
out=$("{sim}" "$@")
code=$?
printf '%s\\n' "$out"
for kernel in $(printf '%s\\n' "$out" | sed -nE 's/^Inst linux-image-([0-9][^ ]*) .*/\\1/p'); do
  touch "{root}/boot/vmlinuz-$kernel"
done
printf '%s\\n' "$out" | sed -nE 's/^Inst linux-modules-nvidia-[0-9]+-server-open-([0-9][^ ]*) .*/\\1/p' >> "{root}/modules"
exit "$code"
'''


@pytest.fixture
def cvm(tmp_path: Path) -> tuple[Machine, Path]:
    """The confidential image's base (one -azure-fde kernel) with the archive's newer kernel and its modules; `modinfo`
    answers for a kernel whose NVIDIA module package was installed."""
    machine = Machine(tmp_path / "cvm", "ubuntu-cvm-2404", ["noble-cc"])
    root = tmp_path / "cvm" / "root"
    (root / "boot").mkdir(parents=True)
    (root / "boot" / "vmlinuz-7.0.0-1007-azure-fde").write_text("")
    (root / "modules").write_text("")
    (machine.bin / "apt-get").rename(machine.bin / "apt-get-sim")
    (machine.bin / "apt-get").write_text(KERNEL_APT.format(sim=machine.bin / "apt-get-sim", root=root))
    (machine.bin / "modinfo").write_text(f'#!/bin/bash\n[ "$1" = -k ] && grep -qx "$2" {root}/modules\n')
    for tool in ("apt-get", "modinfo"):
        (machine.bin / tool).chmod(0o755)
    return machine, root


def test_the_rolling_fde_meta_brings_a_kernel_its_modules_leave_the_base_kernel_without(
        cvm: tuple[Machine, Path], tmp_path: Path) -> None:
    """What the bake installed before: the meta follows the archive's newest ABI, whose modules depend on that ABI's
    kernel, so apt adds the kernel and the base kernel has no module; the bake's own check stops it."""
    machine, root = cvm
    bundle = _bundle(tmp_path, "confidential")
    result = machine.bake(bundle, "confidential", f"ROOT={root}\ninstall_packages "
                                                  "linux-modules-nvidia-580-server-open-azure-fde\n"
                                                  "require_module_for_every_kernel nvidia")
    log = machine.log.read_text()
    assert "Inst linux-image-7.0.0-1008-azure-fde" in log
    assert "Inst linux-modules-nvidia-580-server-open-7.0.0-1008-azure-fde" in log
    assert result.returncode == 1
    assert "kernel 7.0.0-1007-azure-fde has no nvidia module" in result.stderr


def test_the_confidential_bake_takes_the_modules_of_its_own_kernels_abi(cvm: tuple[Machine, Path],
                                                                         tmp_path: Path) -> None:
    machine, root = cvm
    bundle = _bundle(tmp_path, "confidential")
    result = machine.bake(bundle, "confidential", f"ROOT={root}\ncc_transaction")
    assert result.returncode == 0, result.stdout + result.stderr
    log = machine.log.read_text()
    assert "Inst linux-modules-nvidia-580-server-open-7.0.0-1007-azure-fde" in log
    assert "Inst linux-image" not in log and "exit 100" not in log
    holds = machine.holds.read_text()
    assert ("hold linux-modules-nvidia-580-server-open-7.0.0-1007-azure-fde linux-image-7.0.0-1007-azure-fde "
            "linux-image-azure-fde") in holds


def test_a_bake_that_reads_the_live_archive_stops_naming_the_snapshot(tmp_path: Path) -> None:
    """apt read the archive as it is, not the snapshot (an apt too old to know snapshots, a source left unmarked):
    the bake stops before installing, with what apt does offer."""
    machine = Machine(tmp_path / "live", "ubuntu-2204", ["jammy", "kubernetes-1.36"], archive="live")
    result = machine.bake(_bundle(tmp_path, "cpu"), "cpu", "install_kubernetes")
    assert result.returncode == 1
    assert f"containerd 2.2.1-0ubuntu1~22.04.2 is not offered from Ubuntu's snapshot at {UBUNTU_SNAPSHOT}" \
        in result.stderr
    assert "--no-remove install" not in machine.log.read_text()


def test_a_snapshot_older_than_the_pinned_version_stops_the_bake(tmp_path: Path) -> None:
    machine = Machine(tmp_path / "old", "ubuntu-2204", ["jammy", "kubernetes-1.36"],
                      without=(("containerd", "2.2.1-0ubuntu1~22.04.2"),))
    result = machine.bake(_bundle(tmp_path, "cpu"), "cpu", "install_kubernetes")
    assert result.returncode == 1 and "move UBUNTU_SNAPSHOT" in result.stderr
    assert "containerd | 1.5.9-0ubuntu3 |" in result.stderr  # what the snapshot does offer
