"""Node-OS guards, checked against the programs that read them (docs/control-plane.md, "Node-OS guards").

- systemd-networkd must leave Cilium's routes and routing-policy rules alone: the images' networkd.conf drop-in is
  read by systemd's own config merge (`systemd-analyze cat-config`, systemd 252 here) and its keys are in the real
  systemd-networkd's key table (networkd-gperf.gperf compiled into the binary: `Network.ManageForeignRoutes`,
  `Network.ManageForeignRoutingPolicyRules`).
- cgroup v2 is stated: every KubeletConfiguration sets `failCgroupV1: true` (kubelet v1beta1 KubeletConfiguration
  FailCgroupV1; KEP-5573, kubernetes#134298 made true the default in 1.35), and an image whose build VM is not on
  cgroup v2 is not built (images/lib/bake.sh `require_cgroup_v2`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from gpucluster.bake.content import image_files
from gpucluster.bake.os_guards import NETWORKD_DROPIN, NETWORKD_KEYS
from gpucluster.bootstrap.node import NodeBootstrap, kubelet_patch
from tests.support.apiserver_documents import kubeadm_documents, render_apiserver_document

ROOT = Path(__file__).resolve().parent.parent
NETWORKD = next((p for p in ("/lib/systemd/systemd-networkd", "/usr/lib/systemd/systemd-networkd")
                 if os.access(p, os.R_OK)), None)
KUBERNETES_IMAGES = ("gpu", "cpu", "confidential", "apiserver")


@pytest.mark.parametrize("definition", KUBERNETES_IMAGES)
def test_every_kubernetes_image_keeps_networkd_off_foreign_routes(definition: str) -> None:
    files = {f.path: f.content for f in image_files(definition)}
    assert files[NETWORKD_DROPIN] == "[Network]\nManageForeignRoutes=no\nManageForeignRoutingPolicyRules=no\n"


def test_the_etcd_image_has_no_pod_network_to_guard() -> None:
    assert NETWORKD_DROPIN not in {f.path for f in image_files("etcd")}


@pytest.mark.skipif(NETWORKD is None or shutil.which("systemd-analyze") is None, reason="no systemd here")
def test_real_systemd_reads_the_dropin_and_knows_its_keys(tmp_path: Path) -> None:
    content = next(f.content for f in image_files("gpu") if f.path == NETWORKD_DROPIN)
    target = tmp_path / NETWORKD_DROPIN.lstrip("/")
    target.parent.mkdir(parents=True)
    target.write_text(content)
    merged = subprocess.run(["systemd-analyze", f"--root={tmp_path}", "cat-config", "systemd/networkd.conf"],
                            capture_output=True, text=True, check=True).stdout
    assert f"# {target}" in merged and all(f"{key}=no" in merged for key in NETWORKD_KEYS)
    assert NETWORKD is not None
    table = Path(NETWORKD).read_bytes()
    for key in NETWORKD_KEYS:
        assert f"Network.{key}".encode() in table, key
    assert b"Network.ManageForeignRoutesTypo" not in table  # the scan tells known from unknown keys


def test_every_kubelet_refuses_cgroup_v1() -> None:
    node = NodeBootstrap("1.36.4", "10.0.0.4:6443", "abcdef.0123456789abcdef", "sha256:" + "0" * 64, 30, "10.96.0.10")
    assert kubelet_patch(node)["failCgroupV1"] is True
    # The API servers' kubeadm config carries the KubeletConfiguration every kubelet of the cluster starts from.
    kubelet = next(d for d in kubeadm_documents(render_apiserver_document(())) if d["kind"] == "KubeletConfiguration")
    assert kubelet["failCgroupV1"] is True


def _require_cgroup_v2(tmp_path: Path, filesystem: str) -> subprocess.CompletedProcess[str]:
    """The bake library's function, run with a `stat` that reports `filesystem` for /sys/fs/cgroup."""
    text = (ROOT / "images" / "lib" / "bake.sh").read_text()
    start = text.index("require_cgroup_v2() {")
    function = text[start:text.index("\n}\n", start) + 3]
    fake = tmp_path / f"bin-{filesystem}"
    fake.mkdir()
    (fake / "stat").write_text(f"#!/bin/sh\necho {filesystem}\n")
    (fake / "stat").chmod(0o755)
    script = 'die() { echo "gpucluster-bake: $*" >&2; exit 1; }\n' + function + "require_cgroup_v2\necho built\n"
    return subprocess.run(["bash", "-c", script], capture_output=True, text=True,
                          env={"PATH": f"{fake}:/usr/bin:/bin"})


def test_the_bake_stops_on_a_cgroup_v1_build_vm(tmp_path: Path) -> None:
    v1 = _require_cgroup_v2(tmp_path, "tmpfs")
    assert v1.returncode == 1 and "not cgroup2fs" in v1.stderr and "built" not in v1.stdout
    assert _require_cgroup_v2(tmp_path, "cgroup2fs").stdout == "built\n"


def test_the_bake_checks_cgroups_before_anything_else() -> None:
    text = (ROOT / "images" / "lib" / "bake.sh").read_text()
    body = text[text.index("finish_kubernetes_image() {"):]
    assert body.splitlines()[1].strip() == "require_cgroup_v2"
