"""The cluster's own layer answering: DNS (CoreDNS behind the kube-dns Service at the address kubelets are given),
the CNI (Cilium's DaemonSet and operator, the prefix IPAM controller in prefix mode), and every image of the layer
pulled through the cluster's registry."""

from __future__ import annotations

from typing import Any

from gpucluster.catalog.in_cluster import KUEUE_NAMESPACE
from gpucluster.kubernetes.objects import balloons, dns, health
from gpucluster.kubernetes.objects import prefix_ipam as prefix_ipam_objects
from gpucluster.planning.cluster_plan import ClusterPlan
from gpucluster.verify.kube import Kube
from gpucluster.verify.results import Check, Result
from gpucluster.vocabulary import LABEL_SERVICE_NAME

DNS = Check("cluster.dns", "components/kubernetes/objects/dns.py (Deployment coredns, Service kube-dns at the plan's "
                           "dns_service_ip, the kubelets' clusterDNS); EndpointSlices' conditions.ready "
                           "(discovery.k8s.io/v1)")
CNI = Check("cluster.cni", "cilium/cilium install/kubernetes/cilium/templates/cilium-agent/daemonset.yaml (DaemonSet "
                           "cilium) and cilium-operator/deployment.yaml (Deployment cilium-operator), released in the "
                           "release's namespace, kube-system (components/kubernetes/networking.py); prefix mode: "
                           "components/kubernetes/objects/prefix_ipam.py")
IMAGES = Check("cluster.images", "components/planning/registry.py (every rendered image is served by the cluster's "
                                 "registry); kubelet's image-pull waiting reasons (ErrImagePull, ImagePullBackOff, "
                                 "InvalidImageName)")
GPU_OPERATOR_NAMESPACE = "gpu-operator"
"""components/kubernetes/gpu_health.py: the GPU operator's Helm release namespace."""
NAMESPACES = ("kube-system", KUEUE_NAMESPACE, GPU_OPERATOR_NAMESPACE, balloons.NAMESPACE, health.NAMESPACE)
"""Where the library's in-cluster layer runs."""
PULL_FAILURES = frozenset({"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull"})


def _available(deployment: dict[str, Any] | None) -> tuple[int, int]:
    if deployment is None:
        return 0, 0
    return int((deployment.get("status") or {}).get("availableReplicas") or 0), int(
        (deployment.get("spec") or {}).get("replicas") or 0)


def check_dns(kube: Kube, plan: ClusterPlan) -> list[Result]:
    ns = dns.NAMESPACE
    available, wanted = _available(kube.get(f"/apis/apps/v1/namespaces/{ns}/deployments/{dns.APP}"))
    service = kube.get(f"/api/v1/namespaces/{ns}/services/kube-dns")
    slices = kube.list(f"/apis/discovery.k8s.io/v1/namespaces/{ns}/endpointslices",
                       [("labelSelector", f"{LABEL_SERVICE_NAME}=kube-dns")])
    ready = sorted({a for s in slices for e in s.get("endpoints") or []
                    if (e.get("conditions") or {}).get("ready") for a in e.get("addresses") or []})
    problems = []
    if available < max(wanted, 1):
        problems.append(f"Deployment {dns.APP}: {available} of {wanted} replicas available")
    cluster_ip = (service or {}).get("spec", {}).get("clusterIP")
    if cluster_ip != str(plan.ip.dns_service_ip):
        problems.append(f"Service kube-dns at {cluster_ip}, kubelets ask {plan.ip.dns_service_ip}")
    if not ready:
        problems.append("no ready endpoint behind kube-dns")
    subject = f"{ns}/kube-dns"
    if problems:
        return [DNS.failed(subject, "; ".join(problems),
                           f"kubectl -n {ns} describe deploy/{dns.APP} and its pods (system nodes, pod network); a "
                           "Service at another address: delete it and pulumi up again so it takes the planned one")]
    return [DNS.passed(subject, f"{len(ready)} ready endpoint(s) at {cluster_ip}, {available}/{wanted} replicas")]


def check_cni(kube: Kube, plan: ClusterPlan) -> list[Result]:
    problems = []
    daemonset = kube.get("/apis/apps/v1/namespaces/kube-system/daemonsets/cilium")
    status = (daemonset or {}).get("status") or {}
    desired, ready = int(status.get("desiredNumberScheduled") or 0), int(status.get("numberReady") or 0)
    if daemonset is None or desired == 0 or ready < desired:
        problems.append(f"DaemonSet cilium: {ready} of {desired} agents ready")
    deployments = ["cilium-operator"] + ([prefix_ipam_objects.APP] if plan.prefix_mode else [])
    for name in deployments:
        available, wanted = _available(kube.get(f"/apis/apps/v1/namespaces/kube-system/deployments/{name}"))
        if available < max(wanted, 1):
            problems.append(f"Deployment {name}: {available} of {wanted} replicas available")
    if problems:
        return [CNI.failed("kube-system/cilium", "; ".join(problems),
                           "kubectl -n kube-system logs ds/cilium (an agent without addresses waits for its "
                           "CiliumNode's pool) and deploy/cilium-operator; in prefix mode the controller's logs "
                           f"(deploy/{prefix_ipam_objects.APP}) and the azure.nics check")]
    return [CNI.passed("kube-system/cilium", f"{ready}/{desired} agents ready; {', '.join(deployments)} available")]


def check_images(kube: Kube, plan: ClusterPlan) -> list[Result]:
    registry = plan.registry
    problems, containers = [], 0
    for namespace in NAMESPACES:
        for pod in kube.list(f"/api/v1/namespaces/{namespace}/pods"):
            name = f"{namespace}/{pod.get('metadata', {}).get('name')}"
            spec, status = pod.get("spec") or {}, pod.get("status") or {}
            for container in (spec.get("initContainers") or []) + (spec.get("containers") or []):
                containers += 1
                if not registry.serves(str(container.get("image", ""))):
                    problems.append(f"{name} {container.get('name')}: {container.get('image')} is not served by "
                                    f"{registry.login_server}")
            for state in (status.get("initContainerStatuses") or []) + (status.get("containerStatuses") or []):
                waiting = (state.get("state") or {}).get("waiting") or {}
                if waiting.get("reason") in PULL_FAILURES:
                    problems.append(f"{name} {state.get('name')}: {waiting['reason']} {state.get('image')}: "
                                    f"{' '.join(str(waiting.get('message', '')).split())[:200]}")
    subject = f"images of {', '.join(NAMESPACES)}"
    if not containers:
        problems.append("no container at all in the layer's namespaces (CoreDNS, Cilium, Kueue and the GPU operator "
                        "run there on every cluster)")
    if problems:
        return [IMAGES.failed(subject, "; ".join(problems[:8]) + (f" (+{len(problems) - 8} more)"
                                                                  if len(problems) > 8 else ""),
                              "an image that does not pull: the azure.registry check (its cache rule, the Docker Hub "
                              "credential set), az acr cache show; from a node: crictl pull <image>. An image not "
                              "served: the object's image must go through components/planning/registry.py serve()")]
    return [IMAGES.passed(subject, f"{containers} container(s), every image from {registry.login_server} and none "
                                   "failing to pull")]
