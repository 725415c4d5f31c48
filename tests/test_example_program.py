"""examples/own_program/: a Pulumi program of its own that builds a ClusterSpec in Python, plans it with
plan_checked and declares one GpuCluster, run here under Pulumi's mocks (components/offline/engine.py) as `pulumi up`
would run it. What it exports comes from what GpuCluster publishes, and its own resource lands in the cluster's
AzureScope."""

from __future__ import annotations

from ipaddress import IPv4Network
from pathlib import Path

import pytest

from gpucluster.offline.engine import ProgramRun, run_program
from gpucluster.spec import ApiServerSpec, ClusterSpec, ControlPlaneSpec, EtcdSpec, NetworkSpec, PoolKind, PoolSpec
from gpucluster.vocabulary import CLUSTER_TAG

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "own_program"


@pytest.fixture(scope="module")
def example_run() -> ProgramRun:
    return run_program(EXAMPLE / "__main__.py", "research-cluster", "example", {})


def test_the_example_declares_one_cluster_and_exports_what_it_publishes(example_run: ProgramRun) -> None:
    components = [r for r in example_run.registrations if r.type == "gpucluster:index:GpuCluster"]
    assert [c.name for c in components] == ["research"]
    pools = {r.name for r in example_run.registrations if r.type == "gpucluster:azure:NodePool"}
    assert pools == {"research-system", "research-h100"}
    outputs = example_run.outputs
    assert outputs["apiServerEndpoint"] == "10.80.0.4:6443"
    assert outputs["caCertHash"].startswith("sha256:") and outputs["kubeconfig"] == "[secret]"
    scale_sets = {r.name for r in example_run.registrations if r.type == "pulumi-python:dynamic:Resource"
                  and r.inputs.get("armType") == "Microsoft.Compute/virtualMachineScaleSets"}
    assert set(outputs["scaleSetIds"]) == scale_sets and len(scale_sets) == 6
    assert all(i.endswith(f"/virtualMachineScaleSets/{n}") for n, i in outputs["scaleSetIds"].items())
    assert outputs["registry"].endswith(".azurecr.io")


def test_the_programs_own_resource_goes_where_the_clusters_go(example_run: ProgramRun) -> None:
    trainer = next(r for r in example_run.registrations if r.name == "trainer")
    group = next(r for r in example_run.registrations if r.type == "azure-native:resources:ResourceGroup")
    assert trainer.inputs["resourceGroupName"] == group.inputs["resourceGroupName"]
    assert trainer.inputs["location"] == group.inputs["location"] == "eastus2"
    assert trainer.inputs["tags"] == {CLUSTER_TAG: "research"}


def test_a_spec_built_in_python_is_the_spec_a_stack_file_gives() -> None:
    """The models take their Python names (the stack file's camelCase keys are their aliases)."""
    built = ClusterSpec(name="research", location="eastus2", zones=["1", "2", "3"], kubernetes_version="1.36.4",
                        network=NetworkSpec(address_space=[IPv4Network("10.80.0.0/16")]),
                        pools=[PoolSpec(name="system", kind=PoolKind.SYSTEM, vm_size="Standard_D4s_v5", count=3)],
                        control_plane=ControlPlaneSpec(api_servers=ApiServerSpec(count=3), etcd=EtcdSpec(members=3),
                                                       events_etcd=None))
    read = ClusterSpec.model_validate({
        "name": "research", "location": "eastus2", "zones": ["1", "2", "3"], "kubernetesVersion": "1.36.4",
        "network": {"addressSpace": ["10.80.0.0/16"]},
        "pools": [{"name": "system", "kind": "system", "vmSize": "Standard_D4s_v5", "count": 3}],
        "controlPlane": {"apiServers": {"count": 3}, "etcd": {"members": 3}, "eventsEtcd": None}})
    assert built == read
