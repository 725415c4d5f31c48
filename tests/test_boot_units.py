"""Every machine boots through a re-runnable systemd unit (components/bootstrap/boot_unit.py), and every boot step
can run twice: a boot that fails, or a reboot before the node joined, runs the script again.

Consumers: systemd 252's `systemd-analyze verify` reads each unit the documents write (Debian 12's; the images run
systemd 249 on jammy and 255 on noble); bash runs each machine's rendered boot script twice against a root folder
with stand-ins for IMDS, systemctl, kubeadm and sleep, and what it leaves must be the same after both runs."""

from __future__ import annotations

import shutil
import subprocess
import tomllib
from functools import cache
from pathlib import Path

import pytest
import yaml

from gpucluster.bake.content import CONTAINERD_CONFIG, image_files
from gpucluster.bootstrap.boot_unit import RESTART_SECONDS, start_unit
from gpucluster.catalog.node_images import CONTAINERD_CONFIG_VERSION, NODE_IMAGES
from gpucluster.offline.boot_docs import boot_documents
from gpucluster.planning.cluster_plan import plan_cluster
from tests.support.stacks import stack_spec

SYSTEMD_ANALYZE = shutil.which("systemd-analyze")
GROUP = "2deed8b4-d1e9-42be-a40a-9882201aa9f5"
SUBGROUP = "0f0ba375-aaf1-4ac8-a579-a3b180d47de5"
MACHINES = [("gb300", "pool-gb300-gb300-z1-g00r00.yaml"), ("prod", "pool-h100-h100-z1-00.yaml"),
            ("prod", "pool-confidential-confidential-z1-00.yaml"), ("prod", "pool-system-system-z1-00.yaml"),
            ("prod", "apiserver.yaml"), ("prod", "etcd-0.yaml"), ("gb300", "apiserver.yaml")]


@cache
def _documents(stack: str) -> dict[str, dict]:
    return {name: yaml.safe_load(text) for name, text in boot_documents(plan_cluster(stack_spec(stack))).items()}


def _files(document: dict) -> dict[str, str]:
    return {f["path"]: f["content"] for f in document["write_files"]}


def _boot_unit(document: dict) -> tuple[str, str]:
    [_, enable] = document["runcmd"]
    unit = enable[-1]
    return unit, _files(document)[f"/etc/systemd/system/{unit}"]


@pytest.mark.parametrize(("stack", "name"), MACHINES)
def test_every_machine_boots_in_a_unit_that_runs_again_until_it_finished(stack: str, name: str) -> None:
    """Not cloud-init's runcmd (once per instance, cloud-init cc_runcmd.py PER_INSTANCE): runcmd only starts the
    unit; the unit restarts a failed run and runs at every boot until the script's last step wrote its marker."""
    document = _documents(stack)[name]
    unit, text = _boot_unit(document)
    assert document["runcmd"] == start_unit(unit)
    lines = text.splitlines()
    assert "Type=oneshot" in lines and "Restart=on-failure" in lines and f"RestartSec={RESTART_SECONDS}" in lines
    marker = next(line.split("=!", 1)[1] for line in lines if line.startswith("ConditionPathExists=!"))
    script = next(line.split("=", 1)[1] for line in lines if line.startswith("ExecStart="))
    body = [line for line in _files(document)[script].splitlines() if line and not line.startswith("echo ")]
    assert body[-1] == f"touch {marker}", "the marker is the script's last step"
    if not name.startswith("etcd"):
        # kubeadm's preflight and init need the CRI socket (and the GB300 branch reads containerd's unit).
        assert "Wants=network-online.target containerd.service" in lines
        assert "After=network-online.target containerd.service" in lines


@pytest.mark.skipif(SYSTEMD_ANALYZE is None, reason="systemd-analyze is not installed")
@pytest.mark.parametrize("stack", ["prod", "gb300"])
def test_systemd_accepts_every_unit_the_documents_write(stack: str, tmp_path: Path) -> None:
    """`systemd-analyze verify` on each unit as rendered, its programs copied under tmp_path (verify checks they are
    executable) and the unit's paths pointed there."""
    units: dict[str, str] = {}
    for document in _documents(stack).values():
        files = _files(document)
        for path, content in files.items():
            if path.startswith("/etc/systemd/system/") and path.endswith((".service", ".timer")):
                units.setdefault(path.rsplit("/", 1)[1], content)
    assert {"gpucluster-node-boot.service", "gpucluster-apiserver-boot.service", "gpucluster-etcd-boot.service"} <= set(
        units)
    programs = tmp_path / "programs"
    for name, content in units.items():
        for line in content.splitlines():
            key, _, value = line.partition("=")
            if key.startswith("Exec") and value:
                program = value.split()[0].lstrip("-@:+!")
                copy = programs / program.lstrip("/")
                copy.parent.mkdir(parents=True, exist_ok=True)
                copy.write_text("#!/bin/sh\n")
                copy.chmod(0o755)
                content = content.replace(f"={program}", f"={copy}").replace(f"-{program}", f"-{copy}")
        (tmp_path / name).write_text(content)
    assert SYSTEMD_ANALYZE
    result = subprocess.run([SYSTEMD_ANALYZE, "verify", "--man=no", *sorted(str(tmp_path / n) for n in units)],
                            capture_output=True, text=True, timeout=120)
    problems = [line for line in result.stderr.splitlines() if not line.endswith(
        ("not found.", "is not a valid file or not executable."))]
    assert result.returncode == 0 and not problems, result.stderr


STUBS = r'''
sleep() { :; }
curl() {
  local url=${*: -1}
  case "$url" in
    *interconnect*|*"/compute?"*) cat "$ROOT/imds.json" ;;
    *subscriptionId*) echo 00000000-0000-0000-0000-00000000ABCD ;;
    *resourceGroupName*) echo Gpucluster-RG ;;
    */name\?*) echo h100-z1-00_17 ;;
    *) echo "unexpected curl $*" >&2; return 1 ;;
  esac
}
systemctl() {
  echo "systemctl $*" >> "$ROOT/calls"
  case "$1" in is-active) return 3 ;; show) echo infinity ;; esac
}
kubeadm() { echo "kubeadm $*" >> "$ROOT/calls"; }
'''


def _rooted(text: str, root: Path) -> str:
    for prefix in ("/etc/", "/sys/module/", "/proc/sys/", "/var/lib/gpucluster", "/usr/local/bin/"):
        text = text.replace(prefix, f"{root}{prefix}")
    return text


def _snapshot(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): p.read_text() for p in sorted(root.rglob("*"))
            if p.is_file() and p.name != "calls"}


@pytest.mark.parametrize(("stack", "name"), MACHINES)
def test_every_boot_script_leaves_the_same_machine_when_run_twice(stack: str, name: str, tmp_path: Path) -> None:
    """cloud-init writes the files, then the script runs twice (a reboot before the join, a restart after a failed
    run): /etc/hosts, the kubelet patches, the join config (the rack's interconnect labels) and the markers end as
    after the first run."""
    document = _documents(stack)[name]
    root = tmp_path / "root"
    for path, content in _files(document).items():
        target = root / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content)
    (root / "etc" / "hosts").write_text("127.0.0.1 localhost\n")
    for module in ("overlay", "br_netfilter"):
        (root / "sys" / "module" / module).mkdir(parents=True)
    (root / "proc" / "sys" / "net" / "ipv4").mkdir(parents=True)
    (root / "proc" / "sys" / "net" / "ipv4" / "ip_forward").write_text("1\n")
    (root / "usr" / "local" / "bin").mkdir(parents=True)
    (root / "usr" / "local" / "bin" / "etcd").write_text("#!/bin/sh\n")
    (root / "usr" / "local" / "bin" / "etcd").chmod(0o755)
    (root / "imds.json").write_text(f'{{"interconnectGroupId": "{GROUP}", "interconnectSubgroupId": "{SUBGROUP}"}}')
    _, unit = _boot_unit(document)
    script = next(line.split("=", 1)[1] for line in unit.splitlines() if line.startswith("ExecStart="))
    text = _rooted(_files(document)[script], root)
    run = ["bash", "-c", f"ROOT={root}\n{STUBS}\n{text}"]
    first = subprocess.run(run, capture_output=True, text=True, timeout=60)
    assert first.returncode == 0, first.stderr
    after_first = _snapshot(root)
    second = subprocess.run(run, capture_output=True, text=True, timeout=60)
    assert second.returncode == 0, second.stderr
    assert _snapshot(root) == after_first
    if "gb300-z1" in name:
        join = after_first["etc/kubernetes/kubeadm-join.yaml"]
        assert join.count(f"interconnect-group-id={GROUP}") == 1 and join.count(f"subgroup-id={SUBGROUP}") == 1


def test_every_image_writes_the_containerd_config_version_its_containerd_dumps() -> None:
    """The toolkit's drop-in takes the version of the config it read (components/bootstrap/rack.py): the image's file
    and containerd 2.2.1's dump agree on 3, so either source gives a version-3 drop-in under a version-3 root."""
    for definition in NODE_IMAGES:
        files = {f.path: f.content for f in image_files(definition)}
        if CONTAINERD_CONFIG in files:
            assert tomllib.loads(files[CONTAINERD_CONFIG])["version"] == CONTAINERD_CONFIG_VERSION == 3
