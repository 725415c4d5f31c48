"""The prefix IPAM controller's decisions, on recorded Azure responses.

The responses (tests/data/prefix_ipam/) are hand-written in the shape of Microsoft.Network
`NetworkInterfaces_ListVirtualMachineScaleSetNetworkInterfaces` (azure-rest-api-specs network
`examples/VmssNetworkInterfaceList.json`: NIC ids under `.../virtualMachineScaleSets/S/virtualMachines/N/
networkInterfaces/`, `value` plus `nextLink` paging), with the block shapes the 2024-03-01+ model documents for
`privateIPAddress` ("a single IP address or a CIDR block") and `privateIPAddressPrefixLength`. The providerID form
is cloud-provider-azure's (`azure:///subscriptions/.../virtualMachineScaleSets/S/virtualMachines/N`), as the
nodes' boot writes it (components/bootstrap/host_prep.py). CiliumNode `spec.ipam.pool` / `status.ipam.used` are
cilium `pkg/k8s/apis/cilium.io/v2` types (map of address to allocation).
"""

from __future__ import annotations

import json
from ipaddress import IPv4Network
from pathlib import Path
from typing import Any

from gpucluster.agents.prefix_ipam import (
    blocks_by_instance,
    expand,
    pool_patch,
    sync_plan,
)
from gpucluster.planning.agents_image import CONTEXT, DOCKERFILE

DATA = Path(__file__).resolve().parent / "data" / "prefix_ipam"
SUB = "00000000-0000-0000-0000-000000000000"


def _page(name: str) -> dict[str, Any]:
    return json.loads((DATA / name).read_text())


def _node(name: str, scale_set: str, instance: int) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"providerID": (
        f"azure:///subscriptions/{SUB}/resourceGroups/gpucluster-prod/providers/Microsoft.Compute/"
        f"virtualMachineScaleSets/{scale_set}/virtualMachines/{instance}")}}


def _all_nics() -> list[dict[str, Any]]:
    return _page("vmss_nics_page1.json")["value"] + _page("vmss_nics_page2.json")["value"]


def test_blocks_map_to_instances_in_both_documented_shapes() -> None:
    blocks = blocks_by_instance(_all_nics())
    assert blocks == {("h100-z1-00", "0"): [IPv4Network("10.2.0.16/28"), IPv4Network("10.2.0.48/28")],
                      ("h100-z1-00", "3"): [IPv4Network("10.2.0.64/28")]}
    addresses = expand(blocks[("h100-z1-00", "0")])
    assert len(addresses) == 32 and addresses[0] == "10.2.0.16" and addresses[-1] == "10.2.0.63"
    assert "10.2.0.4" not in addresses  # the primary is the node's own address, not a pod's


def test_one_list_call_per_scale_set_and_each_node_gets_its_nics_blocks() -> None:
    calls: list[tuple[str, str, str]] = []

    def list_nics(sub: str, rg: str, scale_set: str) -> list[dict[str, Any]]:
        calls.append((sub, rg, scale_set))
        return _all_nics() if scale_set == "h100-z1-00" else []

    nodes = [_node("h100-z1-00000000", "h100-z1-00", 0), _node("h100-z1-00000003", "h100-z1-00", 3),
             _node("h100-z1-01000000", "h100-z1-01", 0),
             {"metadata": {"name": "no-provider-id"}, "spec": {}}]
    cilium = {n["metadata"]["name"]: {"metadata": n["metadata"]} for n in nodes}
    patches = sync_plan(nodes, cilium, list_nics)
    assert sorted(calls) == [(SUB, "gpucluster-prod", "h100-z1-00"), (SUB, "gpucluster-prod", "h100-z1-01")]
    assert set(patches) == {"h100-z1-00000000", "h100-z1-00000003"}
    assert set(patches["h100-z1-00000003"]["spec"]["ipam"]["pool"]) == {f"10.2.0.{i}" for i in range(64, 80)}
    assert all(v == {} for v in patches["h100-z1-00000000"]["spec"]["ipam"]["pool"].values())


def test_idempotent_and_never_drops_an_address_in_use() -> None:
    desired = expand([IPv4Network("10.2.0.64/28")])
    node = {"spec": {"ipam": {"pool": {ip: {} for ip in desired}}}}
    assert pool_patch(node, desired) is None  # already right: no write
    moved = expand([IPv4Network("10.2.0.80/28")])
    node["status"] = {"ipam": {"used": {"10.2.0.65": {"owner": "default/pod-a", "resource": "pod-a"}}}}
    pool = pool_patch(node, moved)["spec"]["ipam"]["pool"]  # type: ignore[index]
    assert {ip for ip, v in pool.items() if v == {}} == set(moved)
    assert {ip for ip, v in pool.items() if v is None} == set(desired) - {"10.2.0.65"}


def test_deployment_is_host_network_leader_elected_and_least_privilege() -> None:
    """The controller hands out pod addresses, so it cannot wait for one (hostNetwork); where cluster DNS does not
    answer it dials the API server by the endpoint's name (as Cilium's agent, objects/charts.py). Its Kubernetes
    rights are its calls: list/watch nodes, list/watch/patch CiliumNodes (each call authorized by these roles in the
    fake API server: tests/support/ipam_world.py as_the_controller), create its Lease and get/update that one Lease
    (RBAC cannot limit `create` by resourceNames: kubernetes.io/docs/reference/access-authn-authz/rbac)."""
    from gpucluster.agents import prefix_ipam
    from gpucluster.kubernetes.objects.prefix_ipam import LEASE, prefix_ipam_objects
    objects = {o["kind"]: o for o in prefix_ipam_objects({"client_id": "cid"}, "api.prod.internal", 6443,
                                                                 "acr.azurecr.io/gpucluster/agents:1")}
    pod = objects["Deployment"]["spec"]["template"]["spec"]
    assert pod["hostNetwork"] and pod["serviceAccountName"] == objects["ServiceAccount"]["metadata"]["name"]
    env = {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}
    assert env["KUBE_API"] == "https://api.prod.internal:6443" and env["AZURE_CLIENT_ID"] == "cid"
    assert objects["Deployment"]["spec"]["replicas"] == 2  # one leads; the Lease makes the other wait
    assert objects["ClusterRole"]["rules"] == [
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["list", "watch"]},
        {"apiGroups": ["cilium.io"], "resources": ["ciliumnodes"], "verbs": ["list", "watch", "patch"]}]
    named = [r for r in objects["Role"]["rules"] if r.get("resourceNames")]
    assert named == [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "resourceNames": [LEASE],
                      "verbs": ["get", "update"]}]
    # The controller ships in the agents image (agents/Dockerfile copies the script to /opt/gpucluster).
    assert "ConfigMap" not in objects and "volumes" not in pod
    assert pod["containers"][0]["image"] == "acr.azurecr.io/gpucluster/agents:1"
    assert pod["containers"][0]["command"][1] == "/opt/gpucluster/prefix_ipam.py"
    copied = next(line.split()[2:-1] for line in DOCKERFILE.read_text().splitlines()
                  if line.startswith("COPY --chmod=0444 ") and line.endswith(" /opt/gpucluster/"))
    assert {"prefix_ipam.py", "kube_client.py"} <= set(copied)
    assert Path(prefix_ipam.__file__).parent == CONTEXT


def test_cilium_takes_crd_ipam_in_prefix_mode_and_azure_ipam_otherwise() -> None:
    from gpucluster.kubernetes.objects.charts import cilium_values
    azure = {"resource_group": "rg", "subscription_id": "s", "tenant_id": "t", "client_id": "c"}
    prefix = cilium_values("api", 6443, "10.0.0.0/12", {}, prefix_mode=True)
    assert prefix["ipam"] == {"mode": "crd"} and "azure" not in prefix and prefix["routingMode"] == "native"
    secondary = cilium_values("api", 6443, "10.64.0.0/16", azure)
    assert secondary["ipam"] == {"mode": "azure"} and secondary["azure"]["userAssignedIdentityID"] == "c"


def test_first_boot_waits_for_the_controller_in_prefix_mode(prod_spec) -> None:
    """With `ipam: crd` no pod gets a network before the controller has published addresses: without it the
    first boot is stuck, naming the chain."""
    from gpucluster.planning.cluster_plan import plan_cluster
    from gpucluster.simulation.bring_up_layer import chart_workloads, own_workloads, pool_states
    from gpucluster.simulation.engine import simulate
    plan = plan_cluster(prod_spec)
    workloads = [w for w in own_workloads(plan) if w.name != "gpucluster-prefix-ipam"]
    boot = simulate(pool_states(plan), [*chart_workloads(plan), *workloads])
    coredns = [s for s in boot.stuck if s.workload == "coredns"]
    assert coredns and "cilium-agent runs but gives cni only after pod-ips" in coredns[0].reason
    complete = simulate(pool_states(plan), [*chart_workloads(plan), *own_workloads(plan)])
    assert not complete.stuck
