"""Confidential-GPU pools: settings, taints and labels, the per-boot gate, customer-managed keys, bad input."""

from __future__ import annotations

import base64
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpucluster.bake.bundle import IMAGES_DIR
from gpucluster.bake.content import image_files
from gpucluster.bootstrap.confidential import (
    ATTESTATION_LOG,
    GATE_PATH,
    GATE_UNIT,
    KUBELET_CLIENT_CERT,
    KUBELET_CONF,
    PERSISTENCED_OVERRIDE,
    VERIFIER,
    gate_script,
)
from gpucluster.bootstrap.node import BOOT_SCRIPT, JOIN_COMMAND, NodeBootstrap, render_cloud_init
from gpucluster.catalog.images import UBUNTU_CVM_2404, UBUNTU_HPC_2204, is_confidential_image
from gpucluster.catalog.node_images import NODE_IMAGES
from gpucluster.errors import SpecError
from gpucluster.offline.engine import ProgramRun, Registration, run_program
from gpucluster.planning.cluster_plan import plan_cluster
from gpucluster.planning.node_images import NodeImage
from gpucluster.planning.node_template import CONFIDENTIAL_TAINT, autoscaler_tags, node_labels, node_taints
from gpucluster.policies.rules.props import resource_kind
from gpucluster.project import project_root
from gpucluster.spec import ClusterSpec
from gpucluster.vocabulary import LABEL_ATTESTATION, LABEL_CC_MODE
from tests.support.stacks import small_cluster, small_spec

ROOT = project_root(Path(__file__).parent)
ORCHESTRATOR = "4f3e5a11-2b8c-4d0e-9a55-7c1f0e2d3b4a"
VMSS = "azure-native:compute:VirtualMachineScaleSet"


def _confidential_pool(**overrides: Any) -> dict[str, Any]:
    pool: dict[str, Any] = {"name": "cgpu", "kind": "confidential", "vmSize": "Standard_NCC40ads_H100_v5",
                            "count": 4, "zones": ["1", "2"], "podsPerNode": 16}
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
    assert plan_cluster(prod_spec).images.pools[pool.name] == NodeImage("confidential", "1.0.0")
    assert c.customer_key is None
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
        (_cluster(image={"definition": "gpu"}),
         "cluster.pools[1].image.definition: 'gpu' cannot boot these machines: they need the 'confidential' image"),
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
    raw["location"] = "westus2"  # no shared attestation provider in the catalogue; ACR agent pools
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


def test_the_confidential_image_is_baked_from_ubuntu_24_04_for_confidential_vms() -> None:
    """docs/confidential.md: Azure/az-cgpu-onboarding pins `Canonical:ubuntu-24_04-lts:cvm` for Ubuntu 24.04 and,
    since release 4.2.1, installs `linux-modules-nvidia-<branch>-server-open-azure-fde` there (4.1.3 did so only on
    Ubuntu >= 24.04 with an fde kernel >= 6.14); the 570 branch has no -azure-fde module package in Ubuntu's index,
    580 has. The image takes the flavour's per-ABI package for its own kernel, not the rolling meta
    (tests/test_bake_apt.py simulates both)."""
    image = NODE_IMAGES["confidential"]
    assert image.source == UBUNTU_CVM_2404 and image.ubuntu == "noble" and image.security_type == "ConfidentialVmSupported"
    assert is_confidential_image(UBUNTU_CVM_2404) and not is_confidential_image(UBUNTU_HPC_2204)
    bake = (IMAGES_DIR / "confidential" / "bake.sh").read_text()
    assert 'modules="linux-modules-nvidia-${NVIDIA_BRANCH}-server-open-$(cc_kernel_abi)"' in bake
    assert "'linux-image-[0-9]*-azure-fde'" in bake  # the ABI of the base's own -azure-fde kernel
    assert '"linux-modules-nvidia-${NVIDIA_BRANCH}-server-open-azure-fde"' not in bake  # not the rolling meta
    assert "-server-open-azure\"" not in bake and "dkms" not in bake  # signed modules: Secure Boot loads them


def _bootstrap(confidential: bool) -> dict[str, Any]:
    text = render_cloud_init(NodeBootstrap("1.36.4", "10.0.0.4:6443", "abcdef.0123456789abcdef", "sha256:" + "0" * 64,
                                           16, "192.168.0.10", confidential_gpu=confidential))
    return yaml.safe_load(text.removeprefix("#cloud-config\n"))


def test_the_gate_runs_before_the_kubelet_on_every_boot() -> None:
    """The confidential image carries the gate and its unit: `RequiredBy=kubelet.service` with `Before=`, so the
    kubelet starts after the gate passes, on the first boot and after any reboot (systemd.unit(5)). The boot document
    only starts it before joining; it installs nothing."""
    files = {f.path: f.content for f in image_files("confidential")}
    unit = files[f"/etc/systemd/system/{GATE_UNIT}"]
    assert "RequiredBy=kubelet.service" in unit and "Before=kubelet.service" in unit
    assert "Requires=nvidia-persistenced.service" in unit and "After=nvidia-persistenced.service" in unit
    assert files[GATE_PATH] == gate_script()
    document = _bootstrap(True)
    written = {f["path"]: f["content"] for f in document["write_files"]}
    assert GATE_PATH not in written
    boot = written[BOOT_SCRIPT]
    assert f"\nsystemctl start {GATE_UNIT}\n" in boot and boot.index(GATE_UNIT) < boot.index(JOIN_COMMAND)
    plain = {f["path"]: f["content"] for f in _bootstrap(False)["write_files"]}[BOOT_SCRIPT]
    assert GATE_UNIT not in plain and JOIN_COMMAND in plain
    assert GATE_PATH not in {f.path for f in image_files("gpu")}


def test_ready_state_and_persistence_are_set_at_every_boot() -> None:
    """Azure/az-cgpu-onboarding V4.3.3 `src/nvidia-persistenced.override.conf`: the persistence daemon runs with
    `--uvm-persistence-mode` and sets the ready state after it starts; the unit is enabled in the image, so both
    return after every reboot."""
    override = {f.path: f.content for f in image_files("confidential")}[PERSISTENCED_OVERRIDE]
    lines = override.splitlines()
    assert "ExecStart=" in lines
    assert "ExecStart=/usr/bin/nvidia-persistenced --user nvidia-persistenced --uvm-persistence-mode --verbose" in lines
    assert "ExecStartPost=-/usr/bin/nvidia-smi conf-compute -srs 1" in lines
    bake = (IMAGES_DIR / "confidential" / "bake.sh").read_text()
    assert "systemctl enable containerd.service kubelet.service nvidia-persistenced.service" in bake


class GateMachine:
    """The gate script run by bash with stand-ins for the GPU tools and the API server, recording what it asks."""

    def __init__(self, root: Path, *, cc: str = "ON", attests: bool = True, kernel: str = "6.14.0-1012-azure-fde",
                 joined: bool = True) -> None:
        self.root = root
        self.calls = root / "calls"
        bin_dir = root / "bin"
        bin_dir.mkdir(parents=True)
        stubs = {
            "uname": f"echo {kernel}",
            "hostname": "echo CGPU-Z1-00000A",
            "modprobe": 'echo "modprobe $*" >> {calls}',
            "nvidia-smi": f'echo "nvidia-smi $*" >> {{calls}}; [ "$*" = "conf-compute -f" ] && echo "CC status: {cc}"; true',
            "curl": 'echo "curl $*" >> {calls}',
            "logger": "cat >/dev/null",
            "sleep": "true",
        }
        for name, body in stubs.items():
            (bin_dir / name).write_text("#!/bin/bash\n" + body.format(calls=self.calls) + "\n")
            (bin_dir / name).chmod(0o755)
        verifier = root / "verifier" / "bin" / "python"
        verifier.parent.mkdir(parents=True)
        verifier.write_text(f'#!/bin/bash\necho "verifier $*" >> {self.calls}\nexit {0 if attests else 1}\n')
        verifier.chmod(0o755)
        conf = root / "kubelet.conf"
        if joined:
            conf.write_text("clusters:\n- cluster:\n    server: https://api.prod.internal:6443\n")
            (root / "client.pem").write_text("cert")
        script = gate_script().replace(VERIFIER, str(root / "verifier")).replace(KUBELET_CONF, str(conf))
        script = script.replace(KUBELET_CLIENT_CERT, str(root / "client.pem"))
        script = script.replace(ATTESTATION_LOG.rsplit("/", 1)[0], str(root / "log"))
        self.script = root / "gate.sh"
        self.script.write_text(script)
        self.env = {"PATH": f"{bin_dir}:/usr/bin:/bin"}

    def run(self) -> tuple[int, list[str]]:
        result = subprocess.run(["bash", str(self.script)], capture_output=True, text=True, timeout=60, env=self.env)
        return result.returncode, self.calls.read_text().splitlines() if self.calls.exists() else []


def _labels(calls: list[str]) -> list[str]:
    return [json.loads(c.split("--data ", 1)[1].split(" https://", 1)[0])["metadata"]["labels"][LABEL_ATTESTATION]
            for c in calls if c.startswith("curl ") and "-X PATCH" in c]


def test_the_gate_marks_the_node_pending_attests_then_marks_it_passed(tmp_path: Path) -> None:
    code, calls = GateMachine(tmp_path).run()
    assert code == 0, calls
    assert _labels(calls) == ["pending", "passed"]
    patch = next(c for c in calls if c.startswith("curl "))
    assert patch.endswith("https://api.prod.internal:6443/api/v1/nodes/cgpu-z1-00000a")  # the kubelet's node name
    order = [next(i for i, c in enumerate(calls) if c.startswith(p)) for p in
             ("modprobe nvidia", "nvidia-smi conf-compute -f", "verifier -m verifier.cc_admin", "nvidia-smi conf-compute -srs 1")]
    assert order == sorted(order)


@pytest.mark.parametrize(("machine", "reason"), [
    ({"attests": False}, "attestation fails"), ({"cc": "OFF"}, "CC mode off"),
    ({"kernel": "6.8.0-1025-azure"}, "not the -azure-fde kernel the modules are for"),
])
def test_a_failing_gpu_stops_the_kubelet_and_the_label_stays_pending(tmp_path: Path, machine: dict[str, Any],
                                                                     reason: str) -> None:
    code, calls = GateMachine(tmp_path, **machine).run()
    assert code != 0, reason
    assert _labels(calls) == ["pending"], reason


def test_the_first_boot_gate_labels_nothing_the_join_does(tmp_path: Path) -> None:
    """Before the join there is no Node and no kubelet credential: the kubelet registers with the label after the
    gate passed (node labels in the join configuration)."""
    code, calls = GateMachine(tmp_path, joined=False).run()
    assert code == 0 and _labels(calls) == []


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
        assert image["id"].endswith("/galleries/test.node.images/images/confidential/versions/1.0.0")
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
    from gpucluster.offline.preview import preview_document
    from gpucluster.preflight import context_for, preflight

    raw = _cluster(confidential={"customerManagedKey": {"orchestratorObjectId": ORCHESTRATOR}})
    result = preflight(preview_document(customer_key_run)["steps"], context_for(plan_cluster(small_spec(**raw))))
    assert {f.source for f in result.errors} == {"size-region"}
    (vault,) = _of(customer_key_run, "azure-native:keyvault:Vault")
    assert len(vault.inputs["vaultName"]) <= 24 and vault.inputs["vaultName"].startswith("test-cgpu-cmk-")
