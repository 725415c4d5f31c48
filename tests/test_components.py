"""Components under the offline engine: what Network and NodePool register, with the inputs Azure needs."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
import yaml

from gpucluster.offline.engine import ProgramRun, Registration, run_program
from gpucluster.offline.manifests import kubernetes_objects
from gpucluster.policies.rules.props import resource_kind
from gpucluster.project import project_root
from tests.support.stacks import small_cluster

ROOT = project_root(Path(__file__).parent)


@pytest.fixture(scope="module")
def small_run() -> ProgramRun:
    return run_program(ROOT / "__main__.py", "gpucluster", "test", {"gpucluster:cluster": small_cluster()})


def _of(run: ProgramRun, typ: str) -> list[Registration]:
    """Registrations judged as `typ` (node scale sets are dynamic resources read as the typed scale set)."""
    return [r for r in run.registrations if resource_kind(r.type, r.inputs) == typ]


def test_resource_count_follows_scale_sets_not_nodes(small_run: ProgramRun) -> None:
    sets = _of(small_run, "azure-native:compute:VirtualMachineScaleSet")
    # system: 3 VMs -> one large set per zone; gpu: 150 VMs -> 3 InfiniBand domains, one per zone (2 would put half
    # the GPUs in each of two zones, over the zone-share rule)
    assert sorted(r.name for r in sets) == ["gpu-z1-00", "gpu-z2-00", "gpu-z3-00", "system-z1-00", "system-z2-00",
                                            "system-z3-00", "test-cp-apiserver"]
    bigger = small_cluster()
    bigger["pools"][1]["count"] = 300  # more nodes, the same three InfiniBand domains
    again = run_program(ROOT / "__main__.py", "gpucluster", "test", {"gpucluster:cluster": bigger})
    assert len(again.registrations) == len(small_run.registrations)


def test_gpu_scale_set_inputs(small_run: ProgramRun) -> None:
    vmss = next(r for r in _of(small_run, "azure-native:compute:VirtualMachineScaleSet") if r.name == "gpu-z1-00")
    inputs = vmss.inputs
    assert inputs["overprovision"] is False and inputs["singlePlacementGroup"] is True
    assert inputs["orchestrationMode"] == "Uniform" and inputs["zones"] == ["1"]
    assert inputs["sku"] == {"name": "Standard_ND96isr_H100_v5", "tier": "Standard", "capacity": 50}
    assert inputs["upgradePolicy"] == {"mode": "Manual"}
    assert vmss.ignore_changes == ("sku.capacity",)
    profile = inputs["virtualMachineProfile"]
    nic = profile["networkProfile"]["networkInterfaceConfigurations"][0]
    assert nic["enableAcceleratedNetworking"] is True
    assert len(nic["ipConfigurations"]) == 1 + 16  # node + podsPerNode
    assert "publicIPAddressConfiguration" not in nic["ipConfigurations"][0]
    assert profile["osProfile"]["customData"] == "[secret]"
    assert "virtualMachineProfile.osProfile.customData" in vmss.secret_paths
    assert profile["osProfile"]["linuxConfiguration"]["disablePasswordAuthentication"] is True
    assert profile["storageProfile"]["osDisk"]["diffDiskSettings"] == {"option": "Local", "placement": "ResourceDisk"}
    tags = inputs["tags"]
    assert tags["gpucluster-role"] == "gpu" and tags["gpucluster-pool"] == "gpu" and tags["gpucluster-cluster"] == "test"


def test_network_subnets_nsgs_and_egress(small_run: ProgramRun) -> None:
    subnets = {r.inputs["subnetName"]: r.inputs for r in _of(small_run, "azure-native:network:Subnet")}
    assert set(subnets) == {"controlplane", "etcd", "pool-system", "pool-gpu"}
    assert all("natGateway" in s and "networkSecurityGroup" in s for s in subnets.values())
    nsgs = {r.inputs["networkSecurityGroupName"]: r.inputs["securityRules"]
            for r in _of(small_run, "azure-native:network:NetworkSecurityGroup")}
    etcd_rules = {r["name"]: r for r in nsgs["test-etcd"]}
    assert etcd_rules["allow-etcd-from-apiservers"]["sourceAddressPrefixes"] == [subnets["controlplane"]["addressPrefix"]]
    assert etcd_rules["deny-vnet-inbound"]["access"] == "Deny"
    # etcd's metrics port (components/bootstrap/etcd.py --listen-metrics-urls), from the system pool only.
    metrics = etcd_rules["allow-etcd-metrics-from-system"]
    assert metrics["sourceAddressPrefixes"] == [subnets["pool-system"]["addressPrefix"]]
    assert metrics["destinationPortRange"] == "2381" and metrics["priority"] < etcd_rules["deny-vnet-inbound"]["priority"]
    api_rules = {r["name"]: r for r in nsgs["test-controlplane"]}
    assert sorted(api_rules["allow-apiserver-from-nodes"]["sourceAddressPrefixes"]) == sorted(
        [subnets["pool-system"]["addressPrefix"], subnets["pool-gpu"]["addressPrefix"]])
    assert not _of(small_run, "azure-native:network:PublicIPAddress")
    assert len(_of(small_run, "azure-native:network:PublicIPPrefix")) == 1


def test_stack_outputs_hide_secrets(small_run: ProgramRun) -> None:
    assert small_run.outputs["breakGlassSshPrivateKey"] == "[secret]"
    assert small_run.outputs["adminKubeconfig"] == "[secret]"
    assert small_run.outputs["apiServerEndpoint"] == "10.10.0.4:6443"
    assert small_run.outputs["caCertHash"].startswith("sha256:")
    assert small_run.outputs["ipPlan"]["blocks"]["pool-gpu"]


def test_kubernetes_objects_become_manifests(tmp_path: Path) -> None:
    program = tmp_path / "__main__.py"
    program.write_text(
        "import pulumi_kubernetes as k8s\n"
        "k8s.core.v1.ConfigMap('cfg', metadata={'name': 'cfg', 'namespace': 'kube-system'}, data={'a': 'b'})\n")
    run = run_program(program, "gpucluster", "test", {})
    [obj] = kubernetes_objects(run.registrations)
    assert obj["apiVersion"] == "v1" and obj["kind"] == "ConfigMap"
    assert obj["metadata"] == {"name": "cfg", "namespace": "kube-system"} and obj["data"] == {"a": "b"}
    assert yaml.safe_load(yaml.safe_dump(obj)) == obj


def test_ca_hash_is_sha256_of_the_public_key_der() -> None:
    """kubeadm's --discovery-token-ca-cert-hash: sha256 over the DER SubjectPublicKeyInfo."""
    import hashlib

    from gpucluster.azure.pki import ca_public_key_hash

    der = bytes(range(256)) * 2
    body = base64.b64encode(der).decode()
    pem = "-----BEGIN PUBLIC KEY-----\n" + "\n".join(body[i:i + 64] for i in range(0, len(body), 64))
    pem += "\n-----END PUBLIC KEY-----\n"
    assert ca_public_key_hash(pem) == "sha256:" + hashlib.sha256(der).hexdigest()


def test_etcd_members_are_protected_vms_at_their_planned_addresses(small_run: ProgramRun) -> None:
    vms = [r for r in _of(small_run, "azure-native:compute:VirtualMachine")
           if r.inputs["tags"]["gpucluster-role"] != "deploy-runner"]  # the runner: tests/test_deploy_runner.py
    assert sorted(r.name for r in vms) == ["etcd-0", "etcd-1", "etcd-2"]
    assert all(r.protect for r in vms)
    assert sorted(r.inputs["zones"][0] for r in vms) == ["1", "2", "3"]
    assert all(r.inputs["osProfile"]["customData"] == "[secret]" for r in vms)
    nics = {r.name: r.inputs["ipConfigurations"][0] for r in _of(small_run, "azure-native:network:NetworkInterface")}
    assert nics["etcd-0-nic"]["privateIPAddress"] == "10.10.0.68"  # etcd block 10.10.0.64/26, first usable .4
    assert all(r.protect for r in _of(small_run, "azure-native:network:NetworkInterface")
               if "DeployRunner" not in r.urn)  # the runner keeps no state: nothing to protect
    snapshot_writers = [r for r in _of(small_run, "azure-native:authorization:RoleAssignment")
                        if r.name.endswith("-snapshot-writer")]
    assert len(snapshot_writers) == 3


def test_api_server_load_balancer(small_run: ProgramRun) -> None:
    [lb] = _of(small_run, "azure-native:network:LoadBalancer")
    frontend = lb.inputs["frontendIPConfigurations"][0]
    assert frontend["privateIPAddress"] == "10.10.0.4" and frontend["privateIPAllocationMethod"] == "Static"
    assert lb.inputs["sku"]["name"] == "Standard"
    assert lb.inputs["probes"][0]["requestPath"] == "/readyz"
    assert lb.inputs["loadBalancingRules"][0]["frontendPort"] == 6443
    assert not _of(small_run, "azure-native:network:PublicIPAddress")


def test_api_servers_are_a_self_healing_zone_spanning_scale_set(small_run: ProgramRun) -> None:
    api = next(r for r in _of(small_run, "azure-native:compute:VirtualMachineScaleSet") if r.name.endswith("apiserver"))
    inputs = api.inputs
    assert inputs["zones"] == ["1", "2", "3"] and inputs["zoneBalance"] is True
    assert inputs["sku"]["capacity"] == 3 and inputs["automaticRepairsPolicy"]["enabled"] is True
    assert inputs["tags"]["gpucluster-role"] == "apiserver"
    ip = inputs["virtualMachineProfile"]["networkProfile"]["networkInterfaceConfigurations"][0]["ipConfigurations"][0]
    assert ip["loadBalancerBackendAddressPools"][0]["id"].endswith("/loadBalancers/apiserver/backendAddressPools/apiservers")
    assert inputs["virtualMachineProfile"]["osProfile"]["customData"] == "[secret]"


def test_only_node_scale_sets_have_an_autoscaler_and_they_never_resend_capacity(small_run: ProgramRun) -> None:
    """docs/capacity.md: node scale sets' capacity is the autoscaler's, and their route's update sends no sku
    (tests/test_scale_set_provider.py). The control plane's capacity is the plan's: the API-server set is
    azure-native's typed class, whose full-body PUT sends the planned count (the value it must keep), with no
    autoscaler on it; etcd members are single VMs, with no capacity at all."""
    sets = _of(small_run, "azure-native:compute:VirtualMachineScaleSet")
    autoscaled = {r.name for r in sets if r.inputs["tags"].get("cluster-autoscaler-enabled") == "true"}
    assert autoscaled == {r.name for r in sets if r.type == "pulumi-python:dynamic:Resource"} != set()
    [api] = [r for r in sets if r.type == "azure-native:compute:VirtualMachineScaleSet"]
    assert api.name.endswith("apiserver") and api.inputs["sku"]["capacity"] == 3 and not api.ignore_changes
    etcd = _of(small_run, "azure-native:compute:VirtualMachine")
    assert etcd and not any("sku" in r.inputs for r in etcd)


def test_bootstrap_tokens_are_two_slots_keyed_by_period_and_generation(small_run: ProgramRun) -> None:
    """pulumi-random replaces a resource whose `keepers` change: each slot's keepers name its period and the
    generation, so raising the generation replaces both tokens and a new period replaces one."""
    parts = [r for r in small_run.registrations if r.type in ("random:index/randomString:RandomString",
                                                              "random:index/randomPassword:RandomPassword")
             and "bootstrap-token" in r.name]
    assert len(parts) == 4
    assert {r.inputs["keepers"]["generation"] for r in parts} == {"1"}
    assert len({r.inputs["keepers"]["period"] for r in parts}) == 2
    assert "bootstrapTokenId" in small_run.outputs and small_run.outputs["bootstrapTokenId"] != "[secret]"
