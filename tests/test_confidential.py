"""Confidential-GPU pools: settings, taints and labels, the join gate, customer-managed keys, bad input."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.bootstrap.confidential import CC_ON_MARKER, CONFIDENTIAL_TAINT, GATE_PATH, LABEL_CC_MODE, gate_script
from components.bootstrap.node import BOOT_SCRIPT, JOIN_COMMAND, NodeBootstrap, render_cloud_init
from components.catalog.images import UBUNTU_CVM_2204, UBUNTU_HPC_2204, is_confidential_image
from components.cli import project_root
from components.errors import SpecError
from components.offline.engine import ProgramRun, Registration, run_program
from components.planning.cluster_plan import plan_cluster
from components.planning.node_template import autoscaler_tags, node_labels, node_taints
from components.spec import ClusterSpec
from policies.rules.props import resource_kind
from tests.conftest import small_cluster, small_spec

ROOT = project_root(Path(__file__).parent)
ORCHESTRATOR = "4f3e5a11-2b8c-4d0e-9a55-7c1f0e2d3b4a"
VMSS = "azure-native:compute:VirtualMachineScaleSet"


def _confidential_pool(**overrides: Any) -> dict[str, Any]:
    pool: dict[str, Any] = {"name": "cgpu", "kind": "confidential", "vmSize": "Standard_NCC40ads_H100_v5",
                            "count": 4, "zones": ["1", "2"], "podsPerNode": 8}
    pool.update(overrides)
    return pool


def _cluster(**pool_overrides: Any) -> dict[str, Any]:
    raw = small_cluster()
    raw["pools"] = [raw["pools"][0], _confidential_pool(**pool_overrides)]
    return raw


def _problem(raw: dict[str, Any]) -> str:
    with pytest.raises(SpecError) as error:
        plan_cluster(small_spec(**raw))
    return str(error.value)


def test_prod_confidential_pool_plan(prod_spec: ClusterSpec) -> None:
    pool = next(p for p in plan_cluster(prod_spec).pools if p.confidential is not None)
    c = pool.confidential
    assert c is not None
    assert (c.security_type, c.secure_boot, c.vtpm, c.os_disk_encryption) == ("ConfidentialVM", True, True,
                                                                              "VMGuestStateOnly")
    assert c.image == UBUNTU_CVM_2204 and c.customer_key is None
    assert pool.nodes == 64 and {s.zone for s in pool.scale_sets} == {"1", "2"}
    assert not pool.accelerated_networking and not pool.infiniband and not pool.ephemeral_os_disk
    assert pool.size.quota_family in {q.family for q in plan_cluster(prod_spec).quota}


def test_confidential_nodes_are_tainted_and_labelled() -> None:
    pool = plan_cluster(small_spec(**_cluster())).pools[1]
    assert CONFIDENTIAL_TAINT in node_taints(pool)
    labels = node_labels(pool, pool.scale_sets[0], "eastus")
    assert labels["gpucluster.io/confidential"] == "true" and labels[LABEL_CC_MODE] == "on"
    tags = autoscaler_tags("test", pool, pool.scale_sets[0], 0, "eastus")
    # Scale-from-zero templates carry the taint, so pods that do not tolerate it never scale the pool up.
    assert tags["k8s.io_cluster-autoscaler_node-template_taint_gpucluster.io_confidential"] == "true:NoSchedule"
    plain = plan_cluster(small_spec()).pools[1]
    assert CONFIDENTIAL_TAINT not in node_taints(plain)
    assert "gpucluster.io/confidential" not in node_labels(plain, plain.scale_sets[0], "eastus")


def test_customer_key_release_policy() -> None:
    raw = _cluster(confidential={"customerManagedKey": {"orchestratorObjectId": ORCHESTRATOR}})
    key = plan_cluster(small_spec(**raw)).pools[1].confidential.customer_key  # type: ignore[union-attr]
    assert key is not None and key.orchestrator_object_id == ORCHESTRATOR
    padded = key.release_policy_data() + "=" * (-len(key.release_policy_data()) % 4)
    policy = json.loads(base64.urlsafe_b64decode(padded))
    assert policy["anyOf"][0]["authority"] == "https://sharedeus.eus.attest.azure.net/"
    claims = {c["claim"]: c["equals"] for c in policy["anyOf"][0]["allOf"]}
    assert claims == {"x-ms-attestation-type": "sevsnpvm", "x-ms-compliance-status": "azure-compliant-cvm"}


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (_cluster(acceleratedNetworking=True),
         "cluster.pools[1].acceleratedNetworking: Standard_NCC40ads_H100_v5 (confidential) has no accelerated networking"),
        (_cluster(infiniband=True), "cluster.pools[1].infiniband: Standard_NCC40ads_H100_v5 (confidential) has no InfiniBand"),
        (_cluster(image={"publisher": "microsoft-dsvm", "offer": "ubuntu-hpc", "sku": "2204"}),
         "cluster.pools[1].image: microsoft-dsvm:ubuntu-hpc:2204 is not a confidential-VM image"),
        (_cluster(confidential={"osDiskEncryption": "VMGuestStateOnly",
                                "customerManagedKey": {"orchestratorObjectId": ORCHESTRATOR}}),
         "cluster.pools[1].confidential.osDiskEncryption: a customer-managed key requires DiskWithVMGuestState"),
        (_cluster(kind="gpu"), "cluster.pools[1].vmSize: Standard_NCC40ads_H100_v5 is a confidential size"),
        (_cluster(vmSize="Standard_ND96isr_H100_v5"), "cluster.pools[1].vmSize: Standard_ND96isr_H100_v5 is not a "
                                                      "confidential size"),
    ],
    ids=["accelerated-networking", "infiniband", "image", "customer-key-needs-disk-with-guest-state", "ncc-in-gpu-pool",
         "nd-in-cc-pool"],
)
def test_bad_confidential_input(raw: dict[str, Any], expected: str) -> None:
    assert expected in _problem(raw)


def test_encryption_type_follows_the_key() -> None:
    """CMK => DiskWithVMGuestState (the default with a key); platform keys take either type."""
    def encryption(**confidential: Any) -> str:
        plan = plan_cluster(small_spec(**_cluster(confidential=confidential)))
        pool = next(p for p in plan.pools if p.confidential is not None)
        assert pool.confidential is not None
        return pool.confidential.os_disk_encryption

    key = {"orchestratorObjectId": ORCHESTRATOR}
    assert encryption(customerManagedKey=key) == "DiskWithVMGuestState"
    assert encryption(customerManagedKey=key, osDiskEncryption="DiskWithVMGuestState") == "DiskWithVMGuestState"
    assert encryption() == "VMGuestStateOnly"
    assert encryption(osDiskEncryption="DiskWithVMGuestState") == "DiskWithVMGuestState"


def test_confidential_block_only_on_confidential_pools_and_region_authority() -> None:
    raw = small_cluster()
    raw["pools"][1]["confidential"] = {}
    assert "cluster.pools[1].confidential: only pools of kind: confidential" in _problem(raw)
    raw = _cluster(confidential={"customerManagedKey": {"orchestratorObjectId": ORCHESTRATOR}})
    raw["location"] = "swedencentral"
    assert "confidential.customerManagedKey.attestationAuthority: no shared attestation provider" in _problem(raw)
    raw["pools"][1]["confidential"]["customerManagedKey"]["attestationAuthority"] = "https://sharedsec.sec.attest.azure.net/"
    assert plan_cluster(small_spec(**raw)).pools[1].confidential.customer_key is not None  # type: ignore[union-attr]


def test_accelerated_networking_cannot_be_forced_on_a_size_without_it() -> None:
    raw = small_cluster()
    raw["vmSizes"] = {"Standard_Old4": {"vcpus": 4, "memoryGib": 16, "acceleratedNetworking": False, "maxNics": 2,
                                        "quotaFamily": "standardOldFamily", "source": "a test size"}}
    raw["pools"].append({"name": "old", "kind": "cpu", "vmSize": "Standard_Old4", "count": 3,
                         "acceleratedNetworking": True})
    assert "cluster.pools[2].acceleratedNetworking: Standard_Old4 does not support accelerated networking" in \
        _problem(raw)
    raw["pools"][2]["acceleratedNetworking"] = None
    assert plan_cluster(small_spec(**raw)).pools[2].accelerated_networking is False  # defaults to the size
    raw["pools"][1]["acceleratedNetworking"] = False
    assert plan_cluster(small_spec(**raw)).pools[1].accelerated_networking is False  # may be turned off


def test_images_are_told_apart() -> None:
    assert is_confidential_image(UBUNTU_CVM_2204) and not is_confidential_image(UBUNTU_HPC_2204)


def _bootstrap(confidential: bool) -> dict[str, Any]:
    text = render_cloud_init(NodeBootstrap("1.36.4", "10.0.0.4:6443", "abcdef.0123456789abcdef", "sha256:" + "0" * 64,
                                           16, "192.168.0.10", confidential_gpu=confidential))
    return yaml.safe_load(text.removeprefix("#cloud-config\n"))


def test_join_waits_for_cc_mode_and_attestation() -> None:
    document = _bootstrap(True)
    files = {f["path"]: f["content"] for f in document["write_files"]}
    assert files[GATE_PATH] == gate_script()
    # One boot script under `set -e`: kubeadm join runs only when the gate exits 0.
    boot = files[BOOT_SCRIPT]
    assert "set -euo pipefail" in boot
    assert f"\n{GATE_PATH}\n" in boot and boot.index(GATE_PATH) < boot.index(JOIN_COMMAND)
    script = gate_script()
    assert "set -euo pipefail" in script and f'grep -q "{CC_ON_MARKER}"' in script
    assert script.index("nvidia-smi conf-compute -f") < script.index("verifier.cc_admin") < script.index(
        "nvidia-smi conf-compute -srs 1")
    plain = _bootstrap(False)
    assert GATE_PATH not in {f["path"] for f in plain["write_files"]}
    plain_boot = {f["path"]: f["content"] for f in plain["write_files"]}[BOOT_SCRIPT]
    assert GATE_PATH not in plain_boot and JOIN_COMMAND in plain_boot


def _run(raw: dict[str, Any]) -> ProgramRun:
    return run_program(ROOT / "__main__.py", "gpucluster", "test", {"gpucluster:cluster": raw})


def _of(run: ProgramRun, typ: str) -> list[Registration]:
    """Registrations judged as `typ` (node scale sets are dynamic resources read as the typed scale set)."""
    return [r for r in run.registrations if resource_kind(r.type, r.inputs) == typ]


@pytest.fixture(scope="module")
def platform_key_run() -> ProgramRun:
    return _run(_cluster())


@pytest.fixture(scope="module")
def customer_key_run() -> ProgramRun:
    return _run(_cluster(confidential={"customerManagedKey": {"orchestratorObjectId": ORCHESTRATOR}}))


def _cgpu_sets(run: ProgramRun) -> list[Registration]:
    return [r for r in _of(run, VMSS) if r.name.startswith("cgpu-")]


def test_confidential_scale_set_settings(platform_key_run: ProgramRun) -> None:
    sets = _cgpu_sets(platform_key_run)
    assert sorted(s.inputs["zones"][0] for s in sets) == ["1", "2"]
    for vmss in sets:
        profile = vmss.inputs["virtualMachineProfile"]
        assert profile["securityProfile"] == {"securityType": "ConfidentialVM",
                                              "uefiSettings": {"secureBootEnabled": True, "vTpmEnabled": True}}
        disk = profile["storageProfile"]["osDisk"]
        assert "diffDiskSettings" not in disk
        assert disk["managedDisk"]["securityProfile"] == {"securityEncryptionType": "VMGuestStateOnly"}
        image = profile["storageProfile"]["imageReference"]
        assert (image["publisher"], image["offer"], image["sku"]) == ("Canonical", "0001-com-ubuntu-confidential-vm-jammy",
                                                                      "22_04-lts-cvm")
        nic = profile["networkProfile"]["networkInterfaceConfigurations"][0]
        assert nic["enableAcceleratedNetworking"] is False
        assert vmss.inputs["singlePlacementGroup"] is False and vmss.inputs["tags"]["gpucluster-infiniband"] == "false"
    assert not _of(platform_key_run, "azure-native:keyvault:Vault")
    assert not _of(platform_key_run, "azure-native:compute:DiskEncryptionSet")


def test_customer_managed_key(customer_key_run: ProgramRun) -> None:
    (vault,) = _of(customer_key_run, "azure-native:keyvault:Vault")
    (key,) = _of(customer_key_run, "azure-native:keyvault:Key")
    (des,) = _of(customer_key_run, "azure-native:compute:DiskEncryptionSet")
    properties = vault.inputs["properties"]
    assert properties["sku"]["name"] == "premium" and properties["enablePurgeProtection"] is True
    assert properties["enableRbacAuthorization"] is True and vault.protect and key.protect
    kp = key.inputs["properties"]
    assert kp["kty"] == "RSA-HSM" and kp["attributes"]["exportable"] is True and kp["releasePolicy"]["data"]
    assert des.inputs["encryptionType"] == "ConfidentialVmEncryptedWithCustomerKey"
    assert des.inputs["activeKey"]["keyUrl"].startswith("https://")
    roles = {r.name: r for r in _of(customer_key_run, "azure-native:authorization:RoleAssignment") if "cgpu" in r.name}
    release = next(r for name, r in roles.items() if name.endswith("cvm-orchestrator-release"))
    assert release.inputs["principalId"] == ORCHESTRATOR
    assert release.inputs["roleDefinitionId"].endswith("08bbd89e-9f13-488c-ac41-acfcb10c90ab")
    des_user = next(r for name, r in roles.items() if name.endswith("des-key-user"))
    assert des_user.inputs["roleDefinitionId"].endswith("e147488a-f6f5-4113-8e2d-b22465e65bf6")
    for vmss in _cgpu_sets(customer_key_run):
        security = vmss.inputs["virtualMachineProfile"]["storageProfile"]["osDisk"]["managedDisk"]["securityProfile"]
        # A customer-managed key works only with DiskWithVMGuestState (confidential VM FAQ; az-cgpu-onboarding
        # src/cgpu-h100-auto-onboarding.sh "CMK only supports encryption type DiskWithVMGuestState").
        assert security["securityEncryptionType"] == "DiskWithVMGuestState"
        assert "/diskEncryptionSets/test-cgpu-cmk-des" in security["diskEncryptionSet"]["id"]
        # Disks are created only after the encryption set holds its role on the key.
        assert any(d.endswith("RoleAssignment::test-cgpu-cmk-des-key-user") for d in vmss.dependencies)


def test_customer_managed_key_passes_the_arm_preflight(customer_key_run: ProgramRun) -> None:
    """Vault name (global, 3-24), key and disk encryption set names, DiskWithVMGuestState with the confidential
    disk encryption set, Premium vault for the RSA-HSM key: Azure accepts them. The test cluster sits in eastus,
    where NCC sizes are not offered, so that is the only finding."""
    from components.offline.preview import preview_document
    from components.preflight import context_for, preflight

    raw = _cluster(confidential={"customerManagedKey": {"orchestratorObjectId": ORCHESTRATOR}})
    result = preflight(preview_document(customer_key_run)["steps"], context_for(plan_cluster(small_spec(**raw))))
    assert {f.rule for f in result.errors} == {"size-region"}
    (vault,) = _of(customer_key_run, "azure-native:keyvault:Vault")
    assert len(vault.inputs["vaultName"]) <= 24 and vault.inputs["vaultName"].startswith("test-cgpu-cmk-")
