"""Which value of each sysctl a node ends with, read by the programs that apply them, over the image's files and
the base image's own.

Ubuntu-HPC's tuning appends `gc_thresh1/2/3 = 4096/8192/16384` to /etc/sysctl.conf (Azure/azhpc-images
common/hpc-tuning.sh at tag ubuntu-hpc-20241023). Three programs apply sysctls on a node, and /etc/sysctl.conf comes
last in each:
- procps `sysctl --system` applies /etc/sysctl.d, /run/sysctl.d, /usr/local/lib/sysctl.d, /usr/lib/sysctl.d and
  /lib/sysctl.d files sorted by name, then /etc/sysctl.conf (procps-ng v3.3.17 `sysctl.c` PreloadSystem, the
  version Ubuntu 22.04 ships; unchanged in v4.0.2 `src/sysctl.c`, the one this test runs);
- systemd-sysctl at every boot reads the same directories, where Debian-family images link
  /etc/sysctl.d/99-sysctl.conf to ../sysctl.conf (man sysctl.d(5));
- Ubuntu-HPC's own `sunrpc_tcp_settings.service` runs `sysctl -p`, /etc/sysctl.conf alone (hpc-tuning.sh).
So a file in /etc/sysctl.d cannot win against those lines: the bake removes them (images/lib/bake.sh
`strip_sysctl_conf`).

The real procps `sysctl --system --dry-run` and `systemd-sysctl --cat-config` run here in a private mount namespace
where the fake root's files are bind-mounted over the system's; nothing is written to the kernel.
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

from gpucluster.bake.bundle import bake_bundle
from gpucluster.bootstrap.host_prep import SYSCTL_FILE, sysctl_text
from gpucluster.bootstrap.node import ARP_SYSCTLS

UBUNTU_SYSCTL_CONF = "#\n# /etc/sysctl.conf - Configuration file for setting system variables\n#\n"
HPC_TUNING_LINES = [  # Azure/azhpc-images common/hpc-tuning.sh at tag ubuntu-hpc-20241023, appended as written
    "vm.zone_reclaim_mode = 1",
    "net.ipv4.neigh.default.gc_thresh1 = 4096",
    "net.ipv4.neigh.default.gc_thresh2 = 8192",
    "net.ipv4.neigh.default.gc_thresh3 = 16384",
    "sunrpc.tcp_max_slot_table_entries = 128",
]
SYSTEMD_SYSCTL = next((p for p in ("/lib/systemd/systemd-sysctl", "/usr/lib/systemd/systemd-sysctl")
                       if os.access(p, os.X_OK)), None)


def _base_image(root: Path) -> None:
    """Ubuntu-HPC's sysctl files: its /etc/sysctl.conf with the tuning appended, the Debian-family link."""
    (root / "etc" / "sysctl.d").mkdir(parents=True)
    (root / "etc" / "sysctl.conf").write_text(UBUNTU_SYSCTL_CONF + "".join(f"{line}\n" for line in HPC_TUNING_LINES))
    (root / "etc" / "sysctl.d" / "99-sysctl.conf").symlink_to("../sysctl.conf")
    (root / "run-sysctl.d").mkdir()
    (root / "usr-lib-sysctl.d").mkdir()


def _namespace_run(root: Path, command: str) -> str:
    """Run `command` with the fake root's sysctl files in place of the system's, in a private mount namespace."""
    mounts = [f"mount --bind {root}/etc/sysctl.d /etc/sysctl.d", f"mount --bind {root}/etc/sysctl.conf /etc/sysctl.conf",
              f"mount --bind {root}/usr-lib-sysctl.d /usr/lib/sysctl.d"]
    if Path("/run/sysctl.d").is_dir():
        mounts.append(f"mount --bind {root}/run-sysctl.d /run/sysctl.d")
    if Path("/usr/local/lib/sysctl.d").is_dir():
        mounts.append(f"mount --bind {root}/usr-lib-sysctl.d /usr/local/lib/sysctl.d")
    unshare = ["unshare", "--mount", "--propagation", "private"] + ([] if os.geteuid() == 0 else ["--map-root-user"])
    result = subprocess.run([*unshare, "sh", "-ec", "; ".join([*mounts, command])], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stderr
    return result.stdout


def _can_namespace() -> bool:
    if shutil.which("unshare") is None or not Path("/etc/sysctl.conf").is_file():
        return False
    unshare = ["unshare", "--mount"] + ([] if os.geteuid() == 0 else ["--map-root-user"])
    return subprocess.run([*unshare, "true"], capture_output=True, timeout=30).returncode == 0


pytestmark = pytest.mark.skipif(not _can_namespace(), reason="no private mount namespace here to point sysctl at")


def _last_wins(lines: str) -> dict[str, str]:
    """Effective values: what each program applies last (both print `key = value` in application order)."""
    values: dict[str, str] = {}
    for line in lines.splitlines():
        line = line.split("#", 1)[0].strip()
        if "=" in line and not line.startswith(("*", ";")):
            key, value = (part.strip() for part in line.split("=", 1))
            values[key.replace("/", ".")] = value
    return values


def _effective(root: Path) -> dict[str, dict[str, str]]:
    results = {"sysctl --system": _last_wins(_namespace_run(root, "sysctl --system --dry-run")),
               "sysctl -p (sunrpc_tcp_settings.service)": _last_wins((root / "etc" / "sysctl.conf").read_text())}
    if SYSTEMD_SYSCTL:
        results["systemd-sysctl"] = _last_wins(_namespace_run(root, f"{SYSTEMD_SYSCTL} --cat-config"))
    return results


def test_a_sysctl_d_file_alone_loses_to_ubuntu_hpcs_sysctl_conf(tmp_path: Path) -> None:
    """What the boot documents did before the images: /etc/sysctl.d/90-gpucluster.conf beside the tuned sysctl.conf."""
    _base_image(tmp_path)
    (tmp_path / "etc" / "sysctl.d" / Path(SYSCTL_FILE).name).write_text(sysctl_text(ARP_SYSCTLS))
    results = _effective(tmp_path)
    assert results["sysctl --system"]["net.ipv4.neigh.default.gc_thresh3"] == "16384"
    if SYSTEMD_SYSCTL:
        assert results["systemd-sysctl"]["net.ipv4.neigh.default.gc_thresh3"] == "16384"


@pytest.mark.parametrize("definition", ["gpu", "cpu", "confidential"])
def test_the_baked_values_win_in_every_program_that_applies_sysctls(tmp_path: Path, definition: str) -> None:
    """The bake's own functions, run against the fake root: install the image's files, strip sysctl.conf."""
    _base_image(tmp_path)
    bundle = tmp_path / "bundle"
    with tarfile.open(fileobj=io.BytesIO(bake_bundle(definition, "1.0.0", "1.36.4").archive())) as tar:
        tar.extractall(bundle)
    fake = tmp_path / "fake"
    (fake / "etc").mkdir(parents=True)
    shutil.copytree(tmp_path / "etc", fake / "etc", dirs_exist_ok=True, symlinks=True)
    baked = subprocess.run(["bash", "-c", f"set -euo pipefail; . {bundle}/lib/bake.sh; install_files; strip_sysctl_conf"],
                           capture_output=True, text=True, timeout=60, env={"PATH": os.environ["PATH"], "ROOT": str(fake)})
    assert baked.returncode == 0, baked.stderr
    fake.joinpath("run-sysctl.d").mkdir()
    fake.joinpath("usr-lib-sysctl.d").mkdir()
    ours = _last_wins((fake / SYSCTL_FILE.lstrip("/")).read_text())
    assert ours["net.ipv4.neigh.default.gc_thresh3"] == "100000" and ours["net.ipv4.ip_forward"] == "1"
    for program, values in _effective(fake).items():
        for key, value in ours.items():
            if program.startswith("sysctl -p"):
                assert key not in values, f"{program} still sets {key}"
            else:
                assert values.get(key) == value, f"{program}: {key} = {values.get(key)}, the image sets {value}"
    # What sysctl.conf held besides ours stays (zone_reclaim_mode, sunrpc).
    kept = (fake / "etc" / "sysctl.conf").read_text()
    assert "vm.zone_reclaim_mode = 1" in kept and "sunrpc.tcp_max_slot_table_entries = 128" in kept
