"""The in-cluster layer as bring-up workloads (the simulation of its first `pulumi up`), read from the objects the
layer declares.

What a pod needs is read from its rendered spec (components/planning/pod_needs.py and below): its resolver
(`dnsPolicy`, `hostNetwork`), whether it is on the pod network, the in-cluster Services its command names, the
registry its images come from. What a workload gives when it runs (a pod network, addresses, labels, an
untainted node) is what its software does, which no spec says: those rows are in GIVES, each with its source.
A Service gives its name to the workload whose pod labels its selector matches; the Service at the cluster's DNS
address gives cluster DNS.

The charts' pods (Cilium, Kueue, the GPU operator and its NFD subchart) are rendered by the charts at deploy time;
here they are the pod fields their templates render with the library's values (`chart_objects`), each row
naming the template and tag it was read from. They are not rendered with `helm template`: no registry this project
installs from (PyPI, npm, Debian) ships the pinned chart archives (docs/operations.md, "First boot").
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from gpucluster.catalog.in_cluster import DRA_DRIVER_NAMESPACE, DRANET_NAMESPACE
from gpucluster.catalog.versions import CILIUM, DRA_DRIVER, DRANET, GPU_OPERATOR, KUEUE
from gpucluster.errors import Problem, SpecError
from gpucluster.kubernetes.objects.autoscaler import MAX_UNREADY_PERCENT, OK_TOTAL_UNREADY_COUNT
from gpucluster.kubernetes.objects.charts import cilium_values, gpu_operator_values
from gpucluster.kubernetes.objects.common import Object, on_system_nodes
from gpucluster.kubernetes.objects.images import CONTAINER_LISTS, pod_spec
from gpucluster.kubernetes.objects.layer import layer_objects
from gpucluster.kubernetes.objects.nodelocaldns import APP as NODE_LOCAL_DNS_APP
from gpucluster.kubernetes.objects.prefix_ipam import APP as PREFIX_IPAM_APP
from gpucluster.kubernetes.objects.releases import (
    CILIUM_RELEASE,
    DRA_DRIVER_RELEASE,
    DRANET_RELEASE,
    GPU_OPERATOR_RELEASE,
    KUEUE_RELEASE,
    RELEASES,
    ReleaseOptions,
)
from gpucluster.planning.bring_up import BringUp, BringUpStep, Stuck
from gpucluster.planning.cluster_plan import ClusterPlan
from gpucluster.planning.pod_addresses import api_server_pod_addresses, node_addressing
from gpucluster.planning.pod_needs import needs_cluster_dns
from gpucluster.planning.scale_from_zero import scale_from_zero_problems
from gpucluster.simulation.engine import PoolState, Workload, simulate
from gpucluster.simulation.pod_slots import node_pods, pod_slot_problems
from gpucluster.simulation.pulumi_order import ApplyOrder, prerequisites, providers_of
from gpucluster.simulation.release_readiness import ReleaseProblem, release_problems
from gpucluster.vocabulary import (
    GPU_RESOURCE,
    LABEL_APP,
    LABEL_CONTROL_PLANE,
    LABEL_DEPLOY_CONTAINER_TOOLKIT,
    LABEL_DEPLOY_DCGM,
    LABEL_DEPLOY_DCGM_EXPORTER,
    LABEL_DEPLOY_DEVICE_PLUGIN,
    LABEL_DEPLOY_GFD,
    LABEL_DEPLOY_OPERATOR_VALIDATOR,
    LABEL_EXCLUDE_FROM_LB,
    LABEL_HOSTNAME,
    LABEL_NFD_NVIDIA_PCI,
    LABEL_POOL,
    TAINT_PREFLIGHT,
)

NFD_GPU_LABEL = {LABEL_NFD_NVIDIA_PCI: "true"}
NFD_KEY = f"label:{LABEL_NFD_NVIDIA_PCI}=true"
HARDWARE_GPU = "hardware:nvidia-gpu"
"""A fact of pools whose VMs have NVIDIA GPUs: what NFD's PCI source finds (vendor 10de)."""
OPERAND_LABELS = {LABEL_DEPLOY_CONTAINER_TOOLKIT: "true", LABEL_DEPLOY_DEVICE_PLUGIN: "true",
                  LABEL_DEPLOY_DCGM_EXPORTER: "true", LABEL_DEPLOY_DCGM: "true", LABEL_DEPLOY_GFD: "true",
                  LABEL_DEPLOY_OPERATOR_VALIDATOR: "true"}
"""NVIDIA/gpu-operator v26.3.3 controllers/state_manager.go gpuStateLabels (container workloads) has the driver's and
node-status-exporter's labels too, whose operands are disabled here."""
CONTROL_PLANE_TOLERATION = {"key": LABEL_CONTROL_PLANE, "operator": "Equal", "value": "",
                            "effect": "NoSchedule"}
CLUSTER_DNS = "dns:cluster"
"""A fact: the Service at the cluster's DNS address answers (its pods run)."""
DNS_NODE_LOCAL = "dns:node-local"
"""A fact of pools whose NodeLocal DNSCache answers on the link-local address the kubelets give pods as their
nameserver (objects/nodelocaldns.py, bootstrap/from_plan.py `clusterDNS`)."""
POD_IPS = "pod-ips"
"""A fact of pools whose CiliumNodes hold pod addresses: in `ipam: crd` (prefix mode) the prefix IPAM
controller publishes them; Cilium's agent reports ready, and pods get a network, only after."""
NIC_POD_ADDRESSES = "nic:pod-addresses"
"""A fact of pools whose NICs carry pod addresses beside the node's own (/28 blocks in prefix mode, the API servers'
secondary addresses): all the prefix IPAM controller can publish."""
CONTROL_PLANE_POOL = "apiservers"
WEBHOOK_SERVICE = "service:kueue-system/kueue-webhook-service"
HEALTH_GIVER = "gpu-health-*"
"""One health DaemonSet per GPU pool (objects/health.py), all alike."""
SERVICE_NAME = re.compile(r"(?<![\w.-])([a-z0-9](?:[-a-z0-9]*[a-z0-9])?)\.([a-z0-9](?:[-a-z0-9]*[a-z0-9])?)\.svc\b")
"""An in-cluster Service name `<name>.<namespace>.svc[.cluster.local]` in a command, argument or env value."""


@dataclass(frozen=True)
class Gives:
    keys: tuple[str, ...]
    """What it makes possible once running, as the keys blockers name (engine.Workload.gives)."""
    source: str
    conditions: tuple[tuple[str, str], ...] = ()
    """(given key, key the pool must have first)."""


def gives_table(prefix_mode: bool) -> dict[str, Gives]:
    """What each workload's software does once it runs, by workload name."""
    cni = (("cni", POD_IPS),) if prefix_mode else ()
    return {
        "cilium-agent": Gives(("cni",), f"cilium {CILIUM.version}: the agent writes the CNI configuration and loads "
                                        "the datapath; with ipam: crd only after its CiliumNode's spec.ipam.pool "
                                        "holds addresses (docs.cilium.io network/concepts/ipam/crd)", cni),
        PREFIX_IPAM_APP: Gives((POD_IPS,), "agents/prefix_ipam.py: publishes the /28 blocks "
                                           "of each node's NIC into its CiliumNode", ((POD_IPS, NIC_POD_ADDRESSES),)),
        "gpu-operator": Gives(tuple(f"label:{k}={v}" for k, v in OPERAND_LABELS.items()),
                              f"gpu-operator {GPU_OPERATOR.version}: labels nodes NFD found NVIDIA PCI devices on "
                              "for its operands", tuple((f"label:{k}={v}", NFD_KEY) for k, v in OPERAND_LABELS.items())),
        "nfd-worker": Gives((NFD_KEY,), "NFD 0.18.3 pci source: labels nodes with a vendor 10de device",
                            ((NFD_KEY, HARDWARE_GPU),)),
        "nvidia-container-toolkit": Gives(("runtime:nvidia",), "gpu-operator: the toolkit installs the nvidia "
                                                               "runtime handler in containerd"),
        "nvidia-device-plugin": Gives(("gpu-allocatable",), f"gpu-operator: the device plugin registers {GPU_RESOURCE}"),
        "nvidia-dcgm": Gives(("service:gpu-operator/nvidia-dcgm",), "gpu-operator v26.3.3 assets/state-dcgm: the host "
                                                                     "engine behind Service nvidia-dcgm "
                                                                     "(internalTrafficPolicy Local: on its own node)"),
        "kueue-controller-manager": Gives(("service:kueue-system/kueue-webhook-service",),
                                          f"kueue v{KUEUE.version} charts/kueue/templates/webhook/service.yaml: the "
                                          "webhook Service selects the controller-manager pods"),
        NODE_LOCAL_DNS_APP: Gives((DNS_NODE_LOCAL,), "kubernetes/kubernetes cluster/addons/dns/nodelocaldns: "
                                                     "node-cache answers on -localip on its own node"),
        HEALTH_GIVER: Gives((f"untaint:{TAINT_PREFLIGHT}",), "scripts/health_agent.py: removes the preflight "
                                                                "taint once the node's diagnostics pass"),
    }


def _gives(name: str, table: dict[str, Gives]) -> Gives | None:
    return table.get(HEALTH_GIVER if name.startswith("gpu-health-") else name)


@dataclass(frozen=True)
class ChartPod:
    obj: Object
    """A Deployment or DaemonSet with the pod fields the chart's template renders from the library's values."""
    source: str
    release: str = ""
    """The chart name of the release that deploys it (objects/releases.py)."""
    deployed_as: str = ""
    """The object's name as the chart renders it, where the simulation names it otherwise."""


def _workload_object(kind: str, name: str, namespace: str, pod: dict[str, Any],
                     labels: dict[str, str] | None = None, **spec: Any) -> Object:
    template = {"metadata": {"labels": labels or {LABEL_APP: name}}, "spec": pod}
    return {"apiVersion": "apps/v1", "kind": kind, "metadata": {"name": name, "namespace": namespace},
            "spec": {**spec, "template": template}}


NFD_DNS_POLICY = "ClusterFirstWithHostNet"
"""NFD 0.18.3 deployment/helm/node-feature-discovery/values.yaml: master, worker and gc `dnsPolicy`, rendered by
their templates (worker.yaml `dnsPolicy: {{ .Values.worker.dnsPolicy }}`); hostNetwork false."""


CHART_RELEASES = {"cilium-agent": CILIUM_RELEASE.chart, "cilium-operator": CILIUM_RELEASE.chart,
                  "kueue-controller-manager": KUEUE_RELEASE.chart,
                  "nvidia-dra-driver-gpu-kubelet-plugin": DRA_DRIVER_RELEASE.chart,
                  "compute-domain-daemon": DRA_DRIVER_RELEASE.chart, "dranet": DRANET_RELEASE.chart}
"""The release of each chart pod (the DRA driver's controller starts the ComputeDomain daemons); the rest are the GPU
operator's (its NFD subchart included)."""
DEPLOYED_AS = {"cilium-agent": "cilium"}
"""cilium/cilium templates/cilium-agent/daemonset.yaml names the agents' DaemonSet `cilium`
(components/kubernetes/readiness_gate.py watches it by that name)."""


def chart_objects(prefix_mode: bool = False, rack_pools: tuple[str, ...] = (),
                  cilium_max_unavailable: int = 1) -> list[ChartPod]:
    """The pods the pinned charts deploy, as their templates render them with the library's values, each with its
    release; with rack pools (their names) the DRA drivers' node pods too."""
    return [replace(p, release=CHART_RELEASES.get(p.obj["metadata"]["name"], GPU_OPERATOR_RELEASE.chart),
                    deployed_as=DEPLOYED_AS.get(p.obj["metadata"]["name"], p.obj["metadata"]["name"]))
            for p in _chart_objects(prefix_mode, rack_pools, cilium_max_unavailable)]


def _chart_objects(prefix_mode: bool, rack_pools: tuple[str, ...], cilium_max_unavailable: int) -> list[ChartPod]:
    op = gpu_operator_values()
    system = on_system_nodes("x")["nodeSelector"]
    operand = {"tolerations": list(op["daemonsets"]["tolerations"])}
    nfd = op["node-feature-discovery"]
    every = [{"operator": "Exists"}]
    identity = {k: "[at deploy]" for k in ("resource_group", "subscription_id", "tenant_id", "client_id")}
    cilium = cilium_values("", 0, "", identity, prefix_mode, cilium_max_unavailable)
    return [
        ChartPod(_workload_object("DaemonSet", "cilium-agent", "kube-system", {"hostNetwork": True,
                                                                               "tolerations": cilium["tolerations"]},
                                  updateStrategy=cilium["updateStrategy"]),
                 "cilium/cilium install/kubernetes/cilium/templates/cilium-agent/daemonset.yaml (a stored version; "
                 f"{CILIUM.version}'s own could not be read here): hostNetwork true; dnsPolicy only from "
                 "values.dnsPolicy (templates/_extensions.tpl; unset: ClusterFirst, the node's resolver on the host "
                 "network); tolerations and updateStrategy from values"),
        ChartPod(_workload_object("Deployment", "cilium-operator", "kube-system", {
            "hostNetwork": True, "nodeSelector": system, "tolerations": every}),
                 "cilium/cilium install/kubernetes/cilium/templates/cilium-operator/deployment.yaml (a stored "
                 f"version; {CILIUM.version}'s own could not be read here): hostNetwork from operator.hostNetwork, "
                 "dnsPolicy only from operator.dnsPolicy (unset); operator.tolerations default [{operator: Exists}] "
                 "in every Helm reference read"),
        ChartPod(_workload_object("Deployment", "kueue-controller-manager", "kueue-system", {"nodeSelector": system},
                                  {"control-plane": "controller-manager"}),
                 f"kubernetes-sigs/kueue v{KUEUE.version} charts/kueue/templates/manager/manager.yaml: hostNetwork "
                 "and dnsPolicy only from controllerManager values (unset), tolerations from "
                 "controllerManager.tolerations (none); pods labelled control-plane: controller-manager, which "
                 "templates/webhook/service.yaml selects"),
        ChartPod(_workload_object("Deployment", "gpu-operator", "gpu-operator", {
            "nodeSelector": dict(op["operator"]["nodeSelector"]), "tolerations": [CONTROL_PLANE_TOLERATION]}),
                 f"NVIDIA/gpu-operator {GPU_OPERATOR.version} deployments/gpu-operator/values.yaml operator.tolerations "
                 "(control-plane only), templates/operator.yaml (no hostNetwork)"),
        ChartPod(_workload_object("Deployment", "nfd-master", "gpu-operator", {
            "nodeSelector": dict(nfd["master"]["nodeSelector"]), "tolerations": [CONTROL_PLANE_TOLERATION],
            "dnsPolicy": NFD_DNS_POLICY}), "kubernetes-sigs/node-feature-discovery v0.18.3 "
                                           "deployment/helm/node-feature-discovery/values.yaml master.tolerations "
                                           "(control-plane), master.dnsPolicy"),
        ChartPod(_workload_object("Deployment", "nfd-gc", "gpu-operator", {
            "nodeSelector": dict(nfd["gc"]["nodeSelector"]), "dnsPolicy": NFD_DNS_POLICY}),
                 "kubernetes-sigs/node-feature-discovery v0.18.3 values.yaml gc.tolerations ([]), gc.dnsPolicy"),
        ChartPod(_workload_object("DaemonSet", "nfd-worker", "gpu-operator", {
            "tolerations": list(nfd["worker"]["tolerations"]), "dnsPolicy": NFD_DNS_POLICY}),
                 f"NVIDIA/gpu-operator {GPU_OPERATOR.version} values.yaml node-feature-discovery.worker.tolerations "
                 "(ours); kubernetes-sigs/node-feature-discovery v0.18.3 templates/worker.yaml and values.yaml "
                 "worker.dnsPolicy, worker.hostNetwork false, worker.updateStrategy {} (the apps/v1 default)"),
        ChartPod(_workload_object("DaemonSet", "nvidia-container-toolkit", "gpu-operator", {
            "nodeSelector": {LABEL_DEPLOY_CONTAINER_TOOLKIT: "true"}, **operand}),
                 f"NVIDIA/gpu-operator {GPU_OPERATOR.version} assets/state-container-toolkit/0500_daemonset.yaml "
                 "(nodeSelector), daemonsets.tolerations (templates/clusterpolicy.yaml); hostNetwork only when "
                 "configured (controllers/object_controls.go applyHostNetworkConfig)"),
        ChartPod(_workload_object("DaemonSet", "nvidia-device-plugin", "gpu-operator", {
            "nodeSelector": {LABEL_DEPLOY_DEVICE_PLUGIN: "true"}, "runtimeClassName": "nvidia", **operand}),
                 f"NVIDIA/gpu-operator {GPU_OPERATOR.version} assets/state-device-plugin/0500_daemonset.yaml; "
                 "runtimeClassName from controllers/object_controls.go setRuntimeClassName"),
        ChartPod(_workload_object("DaemonSet", "nvidia-dcgm", "gpu-operator", {
            "nodeSelector": {LABEL_DEPLOY_DCGM: "true"}, "runtimeClassName": "nvidia", **operand}),
                 f"NVIDIA/gpu-operator {GPU_OPERATOR.version} assets/state-dcgm/0400_dcgm.yml (dcgm.enabled): host "
                 "engine per GPU node; runtimeClassName from controllers/object_controls.go TransformDCGM"),
        ChartPod(_workload_object("DaemonSet", "nvidia-dcgm-exporter", "gpu-operator", {
            "nodeSelector": {LABEL_DEPLOY_DCGM_EXPORTER: "true"}, "runtimeClassName": "nvidia",
            **operand}), f"NVIDIA/gpu-operator {GPU_OPERATOR.version} assets/state-dcgm-exporter/0800_daemonset.yaml; "
                         "runtimeClassName from controllers/object_controls.go"),
        ChartPod(_workload_object("DaemonSet", "gpu-feature-discovery", "gpu-operator", {
            "nodeSelector": {LABEL_DEPLOY_GFD: "true"}, **operand}),
                 f"NVIDIA/gpu-operator {GPU_OPERATOR.version} assets/gpu-feature-discovery/0500_daemonset.yaml "
                 "(gfd.enabled defaults true); hostNetwork only when gfd.hostNetwork is set "
                 "(controllers/object_controls.go applyHostNetworkConfig)"),
        ChartPod(_workload_object("DaemonSet", "nvidia-operator-validator", "gpu-operator", {
            "nodeSelector": {LABEL_DEPLOY_OPERATOR_VALIDATOR: "true"}, **operand}),
                 f"NVIDIA/gpu-operator {GPU_OPERATOR.version} assets/state-operator-validation/0500_daemonset.yaml"),
        ChartPod(_workload_object("DaemonSet", "cilium-envoy", "kube-system", {
            "hostNetwork": True, "tolerations": every}),
                 "cilium/cilium install/kubernetes/cilium/templates/cilium-envoy/daemonset.yaml (a stored version, "
                 f"commit 02515d1e; {CILIUM.version}'s own could not be read here): the standalone Envoy DaemonSet "
                 "(envoy.enabled), hostNetwork true, envoy.tolerations default [{operator: Exists}]"),
        *(_rack_pods(rack_pools) if rack_pools else ()),
    ]


def _rack_pods(rack_pools: tuple[str, ...]) -> list[ChartPod]:
    """The DRA drivers' node pods on rack pools (components/kubernetes/objects/rack_dra.py values)."""
    on_racks = {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": LABEL_POOL, "operator": "In", "values": list(rack_pools)}]}]}}},
        "tolerations": [{"operator": "Exists"}]}
    return [
        ChartPod(_workload_object("DaemonSet", "nvidia-dra-driver-gpu-kubelet-plugin", DRA_DRIVER_NAMESPACE,
                                  dict(on_racks)),
                 f"kubernetes-sigs/dra-driver-nvidia-gpu v{DRA_DRIVER.version} templates/kubeletplugin.yaml (no "
                 "hostNetwork: a pod address)"),
        ChartPod(_workload_object("DaemonSet", "compute-domain-daemon", DRA_DRIVER_NAMESPACE, dict(on_racks)),
                 f"kubernetes-sigs/dra-driver-nvidia-gpu v{DRA_DRIVER.version} templates/"
                 "compute-domain-daemon.tmpl.yaml: one DaemonSet per ComputeDomain on the nodes its pods run on (no "
                 "hostNetwork); one channel per node (objects/rack_gangs.py) makes it one daemon per node"),
        ChartPod(_workload_object("DaemonSet", "dranet", DRANET_NAMESPACE, {"hostNetwork": True, **on_racks}),
                 f"kubernetes-sigs/dranet v{DRANET.version} deployments/helm/dranet/templates/daemonset.yaml "
                 "(hostNetwork true)"),
    ]


@dataclass(frozen=True)
class Webhook:
    name: str
    failure_policy: str
    service: str
    group: str
    resources: tuple[str, ...]


KUEUE_WEBHOOKS = tuple(Webhook(name, "Fail", WEBHOOK_SERVICE, "kueue.x-k8s.io", (resource,)) for name, resource in (
    ("mclusterqueue.kb.io", "clusterqueues"), ("mresourceflavor.kb.io", "resourceflavors"),
    ("vclusterqueue.kb.io", "clusterqueues"), ("vcohort.kb.io", "cohorts"), ("vresourceflavor.kb.io", "resourceflavors"),
))
"""The Kueue chart's webhooks on the objects the layer applies: kueue v0.19.2
charts/kueue/templates/webhook/manifests.yaml (failurePolicy Fail, Service `kueue-webhook-service` in the release's
namespace, CREATE and UPDATE). Topologies and LocalQueues have none there."""
_PLURALS = {"ClusterQueue": "clusterqueues", "ResourceFlavor": "resourceflavors", "Cohort": "cohorts",
            "Topology": "topologies", "LocalQueue": "localqueues"}


def webhook_applies(objects: list[Object], webhooks: tuple[Webhook, ...] = KUEUE_WEBHOOKS) -> list[Workload]:
    """The layer's objects that kube-apiserver admits only by calling a webhook with failurePolicy Fail, as one
    step on the API servers' pool. kube-apiserver resolves a webhook Service to its ClusterIP (kubernetes
    pkg/controlplane/apiserver buildServiceResolver: NewClusterIPServiceResolver unless --enable-aggregator-routing,
    which the API servers do not set); without kube-proxy, only Cilium's kube-proxy replacement on the API server's
    node translates it: the step needs that node's pod network ("cni") and the Service's pods."""
    hooked: dict[str, set[str]] = {}
    for o in objects:
        group = o["apiVersion"].split("/")[0] if "/" in o["apiVersion"] else ""
        resource = _PLURALS.get(o["kind"], o["kind"].lower() + "s")
        for hook in webhooks:
            if hook.failure_policy == "Fail" and hook.group == group and resource in hook.resources:
                hooked.setdefault(hook.service, set()).add(hook.name)
    return [Workload(f"admission via {service.removeprefix('service:')}", "Apply",
                     {LABEL_CONTROL_PLANE: ""}, ({"operator": "Exists"},), host_network=True,
                     needs=("cni", service), source=f"kube-apiserver calls {', '.join(sorted(names))} "
                                                    "(failurePolicy Fail) while applying the layer's objects")
            for service, names in sorted(hooked.items())]


def _strings(pod: dict[str, Any]) -> Iterable[str]:
    for key in CONTAINER_LISTS:
        for container in pod.get(key) or []:
            yield from (str(s) for s in [*(container.get("command") or []), *(container.get("args") or [])])
            yield from (str(e["value"]) for e in container.get("env") or [] if isinstance(e.get("value"), str))


def service_needs(pod: dict[str, Any]) -> tuple[str, ...]:
    """The in-cluster Services its containers call by name."""
    found = {f"service:{m.group(2)}/{m.group(1)}" for s in _strings(pod) for m in SERVICE_NAME.finditer(s)}
    return tuple(sorted(found))


def image_needs(pod: dict[str, Any], plan: ClusterPlan) -> tuple[str, ...]:
    """A registry each image is pulled from: the cluster's own is reachable from every node from the start (its
    private endpoint, docs/registry.md); any other is reached by nothing in the layer."""
    hosts = set()
    for key in CONTAINER_LISTS:
        for container in pod.get(key) or []:
            image = str(container.get("image", ""))
            if image and not plan.registry.serves(image):
                hosts.add(f"registry:{image.split('/', 1)[0]}")
    return tuple(sorted(hosts))


def cluster_ip_needs(pod: dict[str, Any], objects: list[Object]) -> tuple[str, ...]:
    """A pod that sends to a Service's ClusterIP, in its arguments or in a ConfigMap it mounts (node-cache forwards
    to the cluster DNS address from its Corefile), needs its node's service translation: Cilium's kube-proxy
    replacement, hence a Ready CNI on the node, even on the host network."""
    ips = {str(o["spec"]["clusterIP"]) for o in objects if o["kind"] == "Service"
           and o["spec"].get("clusterIP") not in (None, "", "None")}
    mounted = {v["configMap"]["name"] for v in pod.get("volumes") or [] if "configMap" in v}
    texts = [*_strings(pod), *(str(value) for o in objects if o["kind"] == "ConfigMap"
                               and o["metadata"]["name"] in mounted for value in (o.get("data") or {}).values())]
    return ("cni",) if any(ip in text for ip in ips for text in texts) else ()


def _selected(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def service_gives(objects: list[Object], dns_service_ip: str) -> dict[str, tuple[str, ...]]:
    """Per workload name: the Services whose selector picks its pods (and cluster DNS for the one at the DNS IP)."""
    services = [o for o in objects if o["kind"] == "Service"]
    found: dict[str, list[str]] = {}
    for o in objects:
        spec = pod_spec(o)
        if spec is None:
            continue
        labels = ((o["spec"].get("template") or {}).get("metadata") or {}).get("labels") or {}
        for s in services:
            if _selected(s["spec"].get("selector") or {}, labels):
                keys = found.setdefault(o["metadata"]["name"], [])
                keys.append(f"service:{s['metadata'].get('namespace', 'default')}/{s['metadata']['name']}")
                if s["spec"].get("clusterIP") == dns_service_ip:
                    keys.append(CLUSTER_DNS)
    return {k: tuple(v) for k, v in found.items()}


def read_workloads(objects: list[Object], plan: ClusterPlan, sources: dict[str, str] | None = None) -> list[Workload]:
    """Deployments, StatefulSets and DaemonSets as the simulation places them, every need read from the pod spec."""
    table = gives_table(plan.prefix_mode)
    from_services = service_gives(objects, str(plan.ip.dns_service_ip))
    found = []
    for o in objects:
        if o["kind"] not in ("Deployment", "DaemonSet", "StatefulSet"):
            continue
        pod = pod_spec(o)
        assert pod is not None
        name = o["metadata"]["name"]
        declared = _gives(name, table)
        # Cluster DNS is asked through the node's cache (the kubelets' clusterDNS), which forwards to CoreDNS.
        needs = ((CLUSTER_DNS, DNS_NODE_LOCAL) if needs_cluster_dns(pod, str(plan.ip.dns_service_ip)) else ()) + \
            service_needs(pod) + image_needs(pod, plan) + cluster_ip_needs(pod, objects)
        cpu, memory = requests(pod) if pod.get("containers") else (0, 0)
        affinity = pod.get("affinity") or {}
        terms = ((affinity.get("nodeAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get(
            "nodeSelectorTerms") or []
        anti = (affinity.get("podAntiAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution") or []
        gpus = any(GPU_RESOURCE in ((c.get("resources") or {}).get("requests") or {}) for c in pod.get("containers") or [])
        found.append(Workload(
            name, o["kind"], dict(pod.get("nodeSelector") or {}), tuple(pod.get("tolerations") or ()),
            bool(pod.get("hostNetwork")), pod.get("runtimeClassName"), gpus,
            source=(sources or {}).get(name, "declared by the library"), needs=needs, cpu_millis=cpu,
            memory_mib=memory,
            gives=(declared.keys if declared else ()) + from_services.get(name, ()),
            gives_if=declared.conditions if declared else (),
            node_affinity=tuple(tuple(t.get("matchExpressions") or ()) for t in terms),
            replicas=int(o["spec"].get("replicas", 1)),
            one_per_node=any(t.get("topologyKey") == LABEL_HOSTNAME for t in anti)))
    return found


def rack_pool_names(plan: ClusterPlan) -> tuple[str, ...]:
    return tuple(sorted(p.name for p in plan.pools if p.racks is not None))


def chart_workloads(plan: ClusterPlan) -> list[Workload]:
    """Pods the pinned charts deploy, with the values the library gives them."""
    pods = chart_objects(plan.prefix_mode, rack_pool_names(plan), plan.cni_update.max_unavailable)
    return read_workloads([p.obj for p in pods], plan, {p.obj["metadata"]["name"]: p.source for p in pods})


def own_workloads(plan: ClusterPlan, objects: list[Object] | None = None) -> list[Workload]:
    """The layer's own Deployments and DaemonSets and the admission of its objects (`objects`, default: as the
    components declare them)."""
    objects = layer_objects(plan) if objects is None else objects
    return [*read_workloads(objects, plan), *webhook_applies(objects)]


EVICTION_HARD_MIB = 100
"""kubelet's default evictionHard memory.available (k8s.io/kubelet config/v1beta1 types.go)."""
_UNITS = {"Ki": 1 / 1024, "Mi": 1, "Gi": 1024, "Ti": 1024 * 1024, "k": 1000 / 1024 / 1024, "M": 1000**2 / 1024**2,
          "G": 1000**3 / 1024**2}


def cpu_millis(quantity: str | int | float) -> int:
    text = str(quantity)
    return int(text[:-1]) if text.endswith("m") else int(float(text) * 1000)


def memory_mib(quantity: str | int) -> int:
    text = str(quantity)
    for unit, factor in sorted(_UNITS.items(), key=lambda u: -len(u[0])):
        if text.endswith(unit):
            return int(float(text[: -len(unit)]) * factor + 0.999)
    return int(int(text) / 1024**2 + 0.999)


def requests(pod: dict[str, Any]) -> tuple[int, int]:
    """A pod's effective requests: the larger of any init container and the sum of the containers."""
    def of(c: dict[str, Any]) -> tuple[int, int]:
        r = (c.get("resources") or {}).get("requests") or {}
        return cpu_millis(r.get("cpu", 0)), memory_mib(r.get("memory", 0))
    main = [of(c) for c in pod["containers"]]
    init = [of(c) for c in pod.get("initContainers") or []]
    return (max([sum(c for c, _ in main), *(c for c, _ in init)]), max([sum(m for _, m in main), *(m for _, m in init)]))


def pool_states(plan: ClusterPlan) -> list[PoolState]:
    states = []
    for pool in plan.pools:
        # What the first scale set's kubelets register with, as the boot documents render it (components/planning/
        # boot_plan.py).
        node = plan.boot.node(pool.scale_sets[0].name)
        facts = {HARDWARE_GPU} if pool.size.gpus else set()
        if node_addressing(pool.spec).prefix_mode:
            facts.add(NIC_POD_ADDRESSES)
        states.append(PoolState(pool.name, dict(node.labels), list(node.taints), pool.size.gpus,
                                facts=facts, cpu_millis=pool.size.vcpus * 1000,
                                memory_mib=pool.size.memory_gib * 1024 - EVICTION_HARD_MIB, nodes=pool.nodes))
    # The API servers' kubelets register too: every DaemonSet that tolerates the control-plane taint runs there,
    # Cilium's agent first, and kube-apiserver reaches Services through it. No Deployment lands there (the
    # simulation leaves its allocatable unset, so only DaemonSets and admission steps are placed).
    states.append(PoolState(CONTROL_PLANE_POOL, {LABEL_CONTROL_PLANE: "", LABEL_EXCLUDE_FROM_LB: ""},
                            list(plan.boot.api_server_taints), 0,
                            facts={NIC_POD_ADDRESSES} if api_server_pod_addresses(plan.spec) else set(),
                            nodes=plan.control_plane.api.count))
    return states


def releases_at_size(plan: ClusterPlan, boot: BringUp,
                     options: tuple[ReleaseOptions, ...]) -> list[ReleaseProblem]:
    """Each release judged with its chart DaemonSets on the nodes the simulation placed them on."""
    nodes = {p.name: p.nodes for p in plan.pools} | {CONTROL_PLANE_POOL: plan.control_plane.api.count}
    placed = boot.placements()
    daemonsets = {p.obj["metadata"]["name"]: (p.obj, sum(nodes.get(pool, 0) for pool in placed.get(
        p.obj["metadata"]["name"], ()))) for p in chart_objects(
        plan.prefix_mode, rack_pool_names(plan), plan.cni_update.max_unavailable) if p.obj["kind"] == "DaemonSet"}
    return release_problems(options, daemonsets, OK_TOTAL_UNREADY_COUNT, MAX_UNREADY_PERCENT)


def in_pulumi_order(workloads: list[Workload], order: ApplyOrder, prefix_mode: bool) -> list[Workload]:
    """The workloads as `pulumi up` applies them: each waits for the gates applied before its object (a chart pod:
    before its release), and each gate is a step that passes once its DaemonSet runs on its share of nodes."""
    charts = {p.obj["metadata"]["name"]: p for p in chart_objects(prefix_mode)}
    gate_urns = {g.urn for g in order.gates}

    def gate_name(urn: str) -> str:
        return f"pulumi up: {order.by_urn[urn].name}"

    def gate_keys(urn: str) -> tuple[str, ...]:
        return tuple(f"gate:{gate_name(g.urn)}" for g in order.gates_before(urn))

    found: list[Workload] = []
    applies: dict[str, Workload] = {}
    for w in workloads:
        needs: tuple[str, ...] = ()
        if w.name in charts:
            release = order.releases.get(charts[w.name].release)
            needs = gate_keys(release.urn) if release else ()
        elif (obj := next((o for o in order.objects if o.kind == w.kind and o.name == w.name), None)) is not None:
            needs = gate_keys(obj.urn)
            # Its pods are admitted once its priority class, service account, namespace exist: where what applies
            # them waits for a gate, so do the pods.
            for kind, name, namespace in prerequisites(obj):
                providers = [(gate_keys(u) + ((f"gate:{gate_name(u)}",) if u in gate_urns else ()), u)
                             for u in providers_of(order, kind, name, namespace)]
                if not providers or not min(providers)[0]:
                    continue
                key = f"object:{kind} {namespace + '/' if namespace else ''}{name}"
                applies.setdefault(key, Workload(
                    f"pulumi up: {key.removeprefix('object:')}", "Gate", {}, (), host_network=True,
                    needs=min(providers)[0], gives=(key,),
                    source=f"{min(providers)[1]}, applied after {', '.join(min(providers)[0])}"))
                needs += (key,)
        found.append(replace(w, needs=w.needs + needs))
    found += applies.values()
    deployed = {(p.obj["metadata"]["namespace"], p.deployed_as): name for name, p in charts.items()}
    for gate in order.gates:
        watched = deployed.get((gate.namespace, gate.daemonset), gate.daemonset)
        found.append(Workload(gate_name(gate.urn), "Gate", {}, (), host_network=True,
                              source=f"{gate.urn}: waits for DaemonSet {gate.namespace}/{gate.daemonset} on "
                                     f"{gate.percent}% of its nodes (components/kubernetes/readiness_gate.py)",
                              needs=tuple(f"gate:{gate_name(g.urn)}" for g in order.gates_before(gate.urn)),
                              gives=(f"gate:{gate_name(gate.urn)}",), watches=(watched, gate.percent)))
    return found


def bring_up(plan: ClusterPlan, extra: list[Workload] | None = None, charts: list[Workload] | None = None,
               objects: list[Object] | None = None, order: ApplyOrder | None = None) -> BringUp:
    """Simulate the layer's bring-up; a stuck workload is a plan error naming it and its chain of waits.
    `objects`: the layer's own objects (default: as declared). `order`: the order `pulumi up` applies them in, read
    from the recorded registrations (components/simulation/pulumi_order.py); without it every object is applied at
    once."""
    workloads = [*(chart_workloads(plan) if charts is None else charts), *own_workloads(plan, objects),
                 *(extra or [])]
    if order is not None:
        workloads = in_pulumi_order(workloads, order, plan.prefix_mode)
    boot = simulate(pool_states(plan), workloads)
    pods = node_pods(plan, boot.placements(), workloads)
    releases = [Stuck(f"helm release {p.release}", None, p.reason)
                for p in releases_at_size(plan, boot, RELEASES)]
    bounds = {p.name: (p.spec.min_count, p.nodes) for p in plan.pools}
    releases += [Stuck(f"gangs on flavor {flavor}", None, reason) for flavor, reason in scale_from_zero_problems(
        layer_objects(plan) if objects is None else objects, bounds)]
    # Before anything in the layer: the API servers answer (the first up's /readyz wait, planning/first_up.py), and
    # the flow-control objects are applied first (objects/flowcontrol.py), so no agent starts outside its level.
    boot = BringUp((BringUpStep(0, "kube-apiserver (/readyz)", ("control plane",)),
                      BringUpStep(0, "API Priority and Fairness: gpucluster-node-agents, gpucluster-breakglass",
                               ("control plane",)), *boot.steps), (*boot.stuck, *releases), tuple(pods))
    problems = [Problem("cluster.inCluster", f"{s.workload} cannot start{' on pool ' + s.pool if s.pool else ''}: "
                        f"{s.reason}") for s in boot.stuck] + pod_slot_problems(plan, pods)
    if problems:
        raise SpecError(problems)
    return boot
