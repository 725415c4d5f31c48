"""The bring-up simulation finds the layer's deadlocks from the rendered objects alone: each test takes the objects
as the layer declares them, puts back one field as an earlier version rendered it, and the plan fails naming the
cycle; as declared, the same stack boots."""

from __future__ import annotations

from typing import Any

import pytest

from gpucluster.errors import SpecError
from gpucluster.kubernetes.objects.images import pod_spec
from gpucluster.kubernetes.objects.layer import layer_objects
from gpucluster.planning.cluster_plan import ClusterPlan
from gpucluster.simulation.bring_up_layer import bring_up, own_workloads, service_needs
from gpucluster.simulation.check import plan_checked
from tests.support.stacks import stack_spec


@pytest.fixture(scope="module")
def prod() -> ClusterPlan:
    return plan_checked(stack_spec("prod"))


def _with_pod(objects: list[dict[str, Any]], name: str, **fields: Any) -> list[dict[str, Any]]:
    """The objects with one workload's pod spec changed (None removes a field)."""
    for o in objects:
        if o["kind"] in ("Deployment", "DaemonSet") and o["metadata"]["name"] == name:
            pod = pod_spec(o)
            assert pod is not None
            for key, value in fields.items():
                if value is None:
                    pod.pop(key, None)
                else:
                    pod[key] = value
            return objects
    raise AssertionError(f"no workload {name}")


def _problems(plan: ClusterPlan, objects: list[dict[str, Any]]) -> dict[str, str]:
    with pytest.raises(SpecError) as error:
        bring_up(plan, objects=objects)
    return {p.message.split(" cannot start")[0]: p.message for p in error.value.problems}


def test_as_declared_prod_boots(prod: ClusterPlan) -> None:
    assert bring_up(prod).stuck == ()


def test_coredns_without_dns_policy_forwards_to_itself(prod: ClusterPlan) -> None:
    """No dnsPolicy is ClusterFirst: CoreDNS's resolver is its own Service (coredns plugin/loop/README.md; kubeadm
    cmd/kubeadm/app/phases/addons/dns/manifests.go sets Default)."""
    problems = _problems(prod, _with_pod(layer_objects(prod), "coredns", dnsPolicy=None))
    assert "coredns waits: waits for dns:cluster" in problems["coredns"]
    assert "a cycle (coredns -> coredns)" in problems["coredns"]


def test_the_prefix_ipam_controller_on_cluster_dns_is_a_cycle(prod: ClusterPlan) -> None:
    """ClusterFirstWithHostNet resolves through CoreDNS even on the host network (kubelet getPodDNSType); CoreDNS
    needs a pod network, which in ipam: crd needs the addresses only the controller publishes."""
    problems = _problems(prod, _with_pod(layer_objects(prod), "gpucluster-prefix-ipam",
                                         dnsPolicy="ClusterFirstWithHostNet"))
    line = problems["gpucluster-prefix-ipam"]
    assert "gpucluster-prefix-ipam waits: waits for dns:cluster" in line
    assert "cilium-agent runs but gives cni only after pod-ips" in line
    assert "a cycle (gpucluster-prefix-ipam -> coredns -> cilium-agent -> gpucluster-prefix-ipam)" in line


def test_needs_are_read_from_the_objects(prod: ClusterPlan) -> None:
    """Nothing is declared beside a workload: its resolver, the Services its command names and its images are read
    from its pod spec; the health checks reach DCGM by its Service name (objects/health.py)."""
    workloads = {w.name: w for w in own_workloads(prod)}
    assert workloads["gpucluster-prefix-ipam"].needs == ()
    assert workloads["coredns"].needs == () and "dns:cluster" in workloads["coredns"].gives
    health = workloads["gpu-health-h100"]
    # Pods ask the node's NodeLocal DNSCache (the kubelets' clusterDNS), which forwards to CoreDNS.
    assert health.needs == ("dns:cluster", "dns:node-local", "service:gpu-operator/nvidia-dcgm")
    assert service_needs({"containers": [{"command": ["curl", "http://x.y.svc.cluster.local:80"]}]}) == (
        "service:y/x",)


def test_an_image_from_outside_the_cluster_registry_is_stuck(prod: ClusterPlan) -> None:
    """Nodes reach the cluster's registry through its private endpoint from the start (docs/registry.md); an image
    from anywhere else is reached by nothing the layer deploys."""
    objects = layer_objects(prod)
    coredns = next(o for o in objects if o["kind"] == "Deployment" and o["metadata"]["name"] == "coredns")
    spec = pod_spec(coredns)
    assert spec is not None
    spec["containers"][0]["image"] = "docker.io/coredns/coredns:1.14.2"
    problems = _problems(prod, objects)
    assert "coredns waits: waits for registry:docker.io (nothing in the layer provides it)" in problems["coredns"]
