"""Cluster DNS: CoreDNS resolves upstream through the node, and nothing pod networking depends on needs CoreDNS.

The resolver a pod gets is the kubelet's rule (kubernetes v1.36 pkg/kubelet/network/dns/dns.go `getPodDNSType`),
read from the rendered pod spec (components/planning/pod_needs.py)."""

from __future__ import annotations

from typing import Any

import pytest

from gpucluster.kubernetes.objects.dns import COREFILE, coredns_objects
from gpucluster.kubernetes.objects.images import pod_spec
from gpucluster.kubernetes.objects.layer import layer_objects
from gpucluster.kubernetes.objects.prefix_ipam import prefix_ipam_objects
from gpucluster.planning.cluster_plan import plan_cluster
from gpucluster.planning.pod_needs import dns_type, needs_cluster_dns
from gpucluster.simulation.bring_up_layer import chart_objects
from tests.support.stacks import stack_spec

AZURE = {"subscription_id": "s", "tenant_id": "t", "resource_group": "rg", "client_id": "c"}


def _deployment(objects: list[dict[str, Any]], name: str) -> dict[str, Any]:
    found = next(o for o in objects if o["kind"] == "Deployment" and o["metadata"]["name"] == name)
    spec = pod_spec(found)
    assert spec is not None
    return spec


def test_the_kubelets_resolver_rule() -> None:
    """getPodDNSType: ClusterFirstWithHostNet -> cluster; ClusterFirst -> cluster, but host on the host network;
    Default -> host; None -> only dnsConfig. Unset is ClusterFirst (pkg/apis/core/v1/defaults.go)."""
    assert dns_type({}) == "cluster"
    assert dns_type({"hostNetwork": True}) == "host"
    assert dns_type({"hostNetwork": True, "dnsPolicy": "ClusterFirstWithHostNet"}) == "cluster"
    assert dns_type({"dnsPolicy": "Default"}) == "host"
    assert dns_type({"dnsPolicy": "None", "dnsConfig": {"nameservers": ["1.1.1.1"]}}) == "none"
    assert needs_cluster_dns({"dnsPolicy": "None", "dnsConfig": {"nameservers": ["10.96.0.10"]}}, "10.96.0.10")
    with pytest.raises(ValueError, match="dnsPolicy 'Sometimes'"):
        dns_type({"dnsPolicy": "Sometimes"})


def test_coredns_forwards_to_the_nodes_resolver_not_to_itself() -> None:
    """coredns plugin/loop/README.md: `loop` sends a query to itself and halts the server when it sees it more than
    twice. The Corefile forwards to /etc/resolv.conf; if that file names the kube-dns Service (the pod's DNS is
    cluster DNS) CoreDNS forwards to itself and halts. kubeadm's CoreDNS Deployment
    (kubernetes cmd/kubeadm/app/phases/addons/dns/manifests.go) sets `dnsPolicy: Default`."""
    assert "forward . /etc/resolv.conf" in COREFILE and "\n    loop\n" in COREFILE
    pod = _deployment(coredns_objects(7500, 50, "10.96.0.10", "1.36"), "coredns")
    assert dns_type(pod) == "host", "CoreDNS's /etc/resolv.conf would name its own Service: the loop plugin halts it"


def test_the_prefix_ipam_controller_resolves_azure_through_the_node() -> None:
    """It hands out the pod addresses CoreDNS needs, so it cannot resolve management.azure.com through CoreDNS:
    `ClusterFirstWithHostNet` made that a cycle (controller -> CoreDNS -> pod addresses -> controller)."""
    pod = _deployment(prefix_ipam_objects(AZURE, "api", 6443, "agents:1"), "gpucluster-prefix-ipam")
    assert pod["hostNetwork"] and not needs_cluster_dns(pod)


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_no_host_network_pod_of_the_layer_needs_cluster_dns(stack: str) -> None:
    """A host-network pod runs before any pod has an address; the layer's are the ones pod networking and the
    nodes' readiness depend on. None of them may wait for CoreDNS, which runs on pod addresses."""
    plan = plan_cluster(stack_spec(stack))
    charts = [p.obj for p in chart_objects(plan.prefix_mode)]
    host_network = [(o["metadata"]["name"], spec) for o in [*layer_objects(plan), *charts]
                    if (spec := pod_spec(o)) is not None and spec.get("hostNetwork")]
    assert {"cilium-agent", "cilium-operator"} <= {name for name, _ in host_network}
    if plan.prefix_mode:
        assert any(name == "gpucluster-prefix-ipam" for name, _ in host_network)
    assert [name for name, spec in host_network if needs_cluster_dns(spec, str(plan.ip.dns_service_ip))] == []
