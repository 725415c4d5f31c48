"""The API servers' nodes get pod addresses in prefix mode, so Cilium's agent there comes up and kube-apiserver reaches
Kueue's webhooks (failurePolicy Fail) at their ClusterIP.

Rules: Cilium `ipam: crd` gives a node's pods (and the agent's own router and health addresses) only what its
CiliumNode's spec.ipam.pool holds (docs.cilium.io network/concepts/ipam/crd); kube-apiserver resolves a webhook
Service to its ClusterIP unless --enable-aggregator-routing (kubernetes pkg/controlplane/apiserver
buildServiceResolver); kubeadm registers its control-plane nodes with the control-plane taint, which Cilium's agent
tolerates."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpucluster.agents.prefix_ipam import expand, nic_blocks
from gpucluster.errors import SpecError
from gpucluster.offline.engine import ProgramRun
from gpucluster.planning.pod_addresses import API_SERVER_POD_ADDRESSES, api_server_pod_addresses
from gpucluster.planning.vnet_entries import count_entries
from gpucluster.simulation.bring_up_layer import CONTROL_PLANE_POOL, bring_up, own_workloads, pool_states
from gpucluster.simulation.check import plan_checked
from tests.support.stacks import stack_spec


def test_without_addresses_on_their_nics_the_api_servers_never_join_the_pod_network(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The earlier API-server NIC (one IP configuration): the controller has nothing to publish for those nodes,
    Cilium's agent there never gives a pod network, and the Kueue objects' admission never passes."""
    import gpucluster.simulation.bring_up_layer as bring_up_layer
    plan = plan_checked(stack_spec("prod"))
    monkeypatch.setattr(bring_up_layer, "api_server_pod_addresses", lambda spec: 0)
    with pytest.raises(SpecError) as error:
        bring_up(plan)
    lines = [p.message for p in error.value.problems]
    worker = next(m for m in lines if m.startswith(f"nfd-worker cannot start on pool {CONTROL_PLANE_POOL}"))
    assert "cilium-agent runs but gives cni only after pod-ips" in worker
    assert ("gpucluster-prefix-ipam runs but gives pod-ips only after nic:pod-addresses (nothing in the layer "
            "provides it)") in worker
    admission = next(m for m in lines if m.startswith("admission via kueue-system/kueue-webhook-service"))
    assert "cilium-agent runs but gives cni only after pod-ips" in admission


def test_prod_boots_with_the_api_servers_on_the_pod_network() -> None:
    plan = plan_checked(stack_spec("prod"))
    assert plan.bring_up is not None
    placed = plan.bring_up.placements()
    assert CONTROL_PLANE_POOL in placed["cilium-agent"] and CONTROL_PLANE_POOL in placed["nfd-worker"]
    assert placed["admission via kueue-system/kueue-webhook-service"] == (CONTROL_PLANE_POOL,)
    step = next(w for w in own_workloads(plan) if w.kind == "Apply")
    assert "vresourceflavor.kb.io" in step.source and "vclusterqueue.kb.io" in step.source
    api = next(s for s in pool_states(plan) if s.name == CONTROL_PLANE_POOL)
    assert api.nodes == plan.control_plane.api.count


def test_the_addresses_are_counted_and_declared(prod_run: ProgramRun) -> None:
    """Each API server's NIC: the primary plus four single secondaries (pod001..pod004), one VNet entry each."""
    prod, dev = stack_spec("prod"), stack_spec("dev")
    assert api_server_pod_addresses(prod) == API_SERVER_POD_ADDRESSES and api_server_pod_addresses(dev) == 0
    line = next(x for x in count_entries(prod).lines if x.what.startswith("API servers"))
    assert line.entries_each == 1 + API_SERVER_POD_ADDRESSES and line.members == prod.control_plane.api_servers.count
    [api] = [r for r in prod_run.registrations
             if r.type == "azure-native:compute:VirtualMachineScaleSet" and r.name.endswith("-apiserver")]
    configs = api.inputs["virtualMachineProfile"]["networkProfile"]["networkInterfaceConfigurations"][0][
        "ipConfigurations"]
    assert [c["name"] for c in configs] == ["primary", "pod001", "pod002", "pod003", "pod004"]
    assert [c["primary"] for c in configs] == [True, False, False, False, False]


def test_the_controller_publishes_an_api_servers_secondary_addresses() -> None:
    """A NIC's single secondary addresses are pod addresses; the primary is the node's own."""
    nic = {"properties": {"ipConfigurations": [
        {"properties": {"primary": True, "privateIPAddress": "10.0.0.5"}},
        *({"properties": {"primary": False, "privateIPAddress": f"10.0.0.{i}"}} for i in range(20, 24))]}}
    assert expand(nic_blocks(nic)) == ["10.0.0.20", "10.0.0.21", "10.0.0.22", "10.0.0.23"]


def test_the_api_servers_call_webhooks_at_the_service_cluster_ip(dev_out: Path) -> None:
    """The simulation's admission step needs Cilium on the API servers' nodes because the rendered kube-apiserver
    does not route to endpoints (--enable-aggregator-routing unset)."""
    text = (dev_out / "boot" / "apiserver.yaml").read_text()
    assert "goaway-chance" in text and "enable-aggregator-routing" not in text
