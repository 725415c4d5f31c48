"""`gpucluster plan` and `gpucluster check` end to end, as a user runs them."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.support.cli import gpucluster
from tests.support.scale_sets import is_scale_set
from tests.support.stacks import ROOT, small_cluster


def test_plan_prod(prod_cli_plan) -> None:
    result, out = prod_cli_plan
    assert result.returncode == 0, result.stderr
    summary = json.loads((out / "summary.json").read_text())  # the figures: tests/golden/stacks.json
    t, pods = summary["totals"], summary["ipPlan"]["podIps"]
    assert f"{t['nodes']:,} nodes, {t['gpus']:,} GPUs, {t['vcpus']:,} vCPUs, {t['memoryGib']:,} GiB" in result.stdout
    assert "Confidential pools" in result.stdout and "If a zone is lost" in result.stdout
    # prod relies on no raised limit and no exception to a fixed one: /28 blocks keep it within 65,536 entries
    assert "relies on a raised limit" not in result.stdout and "exceeds the default" not in result.stdout
    assert "Azure documents this limit as fixed" not in result.stdout
    entries = summary["ipPlan"]["entries"]
    assert f"VNet address entries: {entries['vnet']:,} of 65,536" in result.stdout
    preview = json.loads((out / "preview.json").read_text())
    assert f"registered {len(preview['steps'])} resources" in result.stderr  # progress, on stderr
    assert (f"pod IPs: {pods['needed']:,} needed, {summary['ipPlan']['podIpsOnNodes']:,} on the nodes' NICs, "
            f"{pods['available']:,} available") in result.stdout
    h100 = next(q for q in summary["quota"] if q["family"] == "standardNDSH100v5Family")
    assert f"{h100['vcpus']:,}" in result.stdout
    assert (out / "manifests").is_dir()
    steps = preview["steps"]
    assert all(s["op"] == "create" and {"type", "inputs", "parent", "protect", "ignoreChanges", "dependencies",
                                        "provider"} <= set(s["newState"]) for s in steps)
    assert len(steps) < 400  # proportional to pools and scale sets, not nodes (354 at 7,500 nodes)
    assert "PRIVATE KEY" not in (out / "preview.json").read_text()
    sets = [s for s in steps if is_scale_set(s["newState"])]
    gpu_sets = [s for s in sets if s["newState"]["inputs"]["tags"]["gpucluster-role"] == "gpu"]
    assert len(gpu_sets) >= 32
    assert all(s["newState"]["inputs"]["sku"]["capacity"] <= 100 for s in gpu_sets)


def test_prod_is_deployable_in_prefix_mode(prod_cli_plan) -> None:
    """prod's /28 blocks reach ARM: every node scale set is declared at Microsoft.Compute 2026-07-02 (the first
    version carrying privateIPAddressPrefixLength, components/azure/scale_set/routes.py) with the field, the preflight
    raises nothing about it, and the figures hold: >= 200,000 pod addresses within the VNet's 65,536 entries."""
    result, out = prod_cli_plan
    assert result.returncode == 0 and "prefix-on-nic-api-version" not in result.stdout + result.stderr
    assert "not deployable" not in result.stdout + result.stderr
    summary = json.loads((out / "summary.json").read_text())
    entries, pods = summary["ipPlan"]["entries"], summary["ipPlan"]["podIps"]
    assert pods["available"] >= 200_000 and entries["vnet"] <= 65_536
    steps = json.loads((out / "preview.json").read_text())["steps"]
    nodes = [s["newState"] for s in steps if is_scale_set(s["newState"])
             and s["newState"]["inputs"]["tags"]["gpucluster-role"] != "apiserver"]
    assert len(nodes) == 43
    for state in nodes:
        inputs = state["inputs"]
        assert state["type"] == "pulumi-python:dynamic:Resource" and inputs["apiVersion"] == "2026-07-02"
        assert inputs["armType"] == "Microsoft.Compute/virtualMachineScaleSets"
        assert inputs["__provider"] == "[dynamic provider gpucluster.azure.scale_set_provider.ScaleSetProvider]"
        [nic] = inputs["virtualMachineProfile"]["networkProfile"]["networkInterfaceConfigurations"]
        assert any(c.get("privateIPAddressPrefixLength") == 28 for c in nic["ipConfigurations"])


def test_plan_writes_every_boot_document(prod_cli_plan) -> None:
    """out/<stack>/boot/: the documents machines boot with, secrets as markers (components/offline/boot_docs.py)."""
    from gpucluster.offline.boot_docs import boot_documents
    from gpucluster.planning.cluster_plan import plan_cluster
    from tests.support.stacks import stack_spec

    _, out = prod_cli_plan
    written = {p.name: p.read_text() for p in (out / "boot").iterdir()}
    assert written == boot_documents(plan_cluster(stack_spec("prod")))
    assert {"apiserver.yaml", "etcd-0.yaml", "etcd-events-0.yaml"} <= set(written)
    assert not any("PRIVATE KEY" in text for text in written.values())


def test_check_passes_on_prod_and_fails_when_broken(prod_cli_plan, tmp_path: Path) -> None:
    _, out = prod_cli_plan
    ok = gpucluster("check", str(out / "preview.json"))
    assert ok.returncode == 0, ok.stdout
    preview = json.loads((out / "preview.json").read_text())
    vmss = next(s for s in preview["steps"] if is_scale_set(s["newState"]))
    vmss["newState"]["inputs"]["overprovision"] = True
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps(preview))
    bad = gpucluster("check", str(broken))
    assert bad.returncode == 1
    assert "azure-native-compute-virtualmachinescaleset-no-overprovision" in bad.stdout
    assert vmss["urn"] in bad.stdout.replace("\n", "")


def test_plan_dev_by_path(tmp_path: Path) -> None:
    result = gpucluster("plan", str(ROOT / "stacks" / "Pulumi.dev.yaml"), "--out", str(tmp_path / "dev"), "--json")
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["stack"] == "dev" and summary["totals"]["gpus"] == 3 and summary["policies"]["violations"] == []
    # one GPU per zone (T4s in zones 1 and 2, the confidential VM in zone 3), as the zone-share rule wants
    assert {z: v["gpus"] for z, v in summary["zones"].items()} == {"1": 1, "2": 1, "3": 1}
    assert result.stderr == ""  # no progress lines in --json mode
    assert json.loads((tmp_path / "dev" / "summary.json").read_text()) == summary


def _write_stack(tmp_path: Path, cluster: object) -> Path:
    path = tmp_path / "Pulumi.broken.yaml"
    path.write_text(yaml.safe_dump({"config": {"gpucluster:cluster": cluster}}))
    return path


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (lambda c: c.update(colour="blue"), "cluster.colour: unknown key"),
        (lambda c: c["pools"][0].update(count="lots"), "cluster.pools[0].count: must be a whole number"),
        (lambda c: c["pools"][1].update(count=-1), "cluster.pools[1].count: must be >= 1 (got -1)"),
        (lambda c: c["network"].update(addressSpace=["10.0.0.0/16", "10.0.0.0/17"]),
         "cluster.network.addressSpace[1]: 10.0.0.0/17 overlaps addressSpace[0]"),
        (lambda c: c["network"].update(addressSpace=["172.16.0.0/16"]),
         "cluster.network.addressSpace[0]: 172.16.0.0/16 overlaps 172.16.0.0/16"),
        (lambda c: c["pools"][1].update(count=3000), "cluster.pools[1]: needs a"),
        (lambda c: c["pools"][1].update(vmSize="Standard_Nope"), "cluster.pools[1].vmSize: unknown VM size"),
        (lambda c: c["pools"].append({"name": "cgpu", "kind": "confidential", "vmSize": "Standard_NCC40ads_H100_v5",
                                      "count": 1, "confidential": {"osDiskEncryption": "VMGuestStateOnly",
                                                                   "customerManagedKey": {
                                                                       "orchestratorObjectId": "0" * 8 + "-0000" * 3
                                                                                               + "-" + "0" * 12}}}),
         "cluster.pools[2].confidential.osDiskEncryption: a customer-managed key requires DiskWithVMGuestState"),
    ],
)
def test_bad_stack_exits_2_with_one_line_and_writes_nothing(tmp_path: Path, mutate, expected: str) -> None:
    cluster = small_cluster()
    mutate(cluster)
    out = tmp_path / "out"
    result = gpucluster("plan", str(_write_stack(tmp_path, cluster)), "--out", str(out))
    assert result.returncode == 2
    assert expected in result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    assert not out.exists()


@pytest.mark.parametrize(("text", "expected"), [("", "the file is empty"), ("config: {a: [", "invalid YAML")])
def test_unreadable_stack_files(tmp_path: Path, text: str, expected: str) -> None:
    path = tmp_path / "Pulumi.x.yaml"
    path.write_text(text)
    result = gpucluster("plan", str(path), "--out", str(tmp_path / "out"))
    assert result.returncode == 2 and expected in result.stderr and "Traceback" not in result.stderr


def test_out_must_be_a_folder(tmp_path: Path) -> None:
    target = tmp_path / "file.txt"
    target.write_text("keep me")
    result = gpucluster("plan", "dev", "--out", str(target), "--quiet")
    assert result.returncode == 2 and result.stderr.strip() == f"error: --out: {target} is a file; give a folder " \
        "name (a new one, or one this tool wrote)"
    assert target.read_text() == "keep me"


def test_missing_stack_and_bad_preview(tmp_path: Path) -> None:
    missing = gpucluster("plan", "nosuchstack")
    assert missing.returncode == 2 and "stack file not found" in missing.stderr
    (tmp_path / "p.json").write_text("{not json")
    bad = gpucluster("check", str(tmp_path / "p.json"))
    assert bad.returncode == 2 and "not valid JSON" in bad.stderr


def test_quiet_plan_prints_only_policy_results(dev_cli_plan: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    result, _ = dev_cli_plan  # `gpucluster plan dev --quiet --out ...`, shared with every test that reads out/dev
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "Policies: no violations" and result.stderr == ""


def test_dev_relies_on_its_policy_config(tmp_path: Path) -> None:
    """dev's single API server passes only through policies/config/dev.json; without it the rule fails the plan."""
    empty = tmp_path / "none.json"
    empty.write_text("{}")
    result = gpucluster("plan", "dev", "--out", str(tmp_path / "dev"), "--quiet", "--policy-config", str(empty))
    assert result.returncode == 1
    assert "azure-native-compute-virtualmachinescaleset-apiserver-zone-spread" in result.stdout
    assert "1 API servers; at least 3 are required" in result.stdout
    assert "gpucluster:azure:ControlPlane$azure-native:compute:VirtualMachineScaleSet::dev-cp-apiserver" in result.stdout


def test_bad_policy_config_exits_2(tmp_path: Path) -> None:
    config = tmp_path / "cfg.json"
    config.write_text(json.dumps({"azure-native-compute-virtualmachine-etcd-quorum-spread": {"minMembers": "three"}}))
    result = gpucluster("check", str(tmp_path / "missing.json"), "--policy-config", str(config))
    assert result.returncode == 2
    assert result.stderr.strip() == f"error: {config}: azure-native-compute-virtualmachine-etcd-quorum-spread.minMembers: " \
                                    "'three' is not of type 'integer'"
