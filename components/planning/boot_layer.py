"""The in-cluster layer as first-boot workloads: the library's own pod specs and the pinned charts' pods."""

from __future__ import annotations

from typing import Any

from components.bootstrap.node import PREFLIGHT_TAINT_KEY
from components.bootstrap.taints import NodeTaint
from components.errors import Problem, SpecError
from components.kubernetes.objects.autoscaler import autoscaler_objects
from components.kubernetes.objects.balloons import balloon_objects
from components.kubernetes.objects.charts import gpu_operator_values
from components.kubernetes.objects.common import on_system_nodes
from components.kubernetes.objects.csr_approver import csr_approver_from_plan
from components.kubernetes.objects.dns import coredns_objects
from components.kubernetes.objects.health import health_objects
from components.kubernetes.objects.prefix_ipam import APP as PREFIX_IPAM_APP
from components.kubernetes.objects.prefix_ipam import prefix_ipam_objects
from components.planning.cluster_plan import ClusterPlan
from components.planning.first_boot import (
    BootStep,
    FirstBoot,
    PoolState,
    Workload,
    simulate,
)
from components.planning.node_template import node_labels, node_taints, registers_preflight

NFD_GPU_LABEL = {"feature.node.kubernetes.io/pci-10de.present": "true"}
NFD_KEY = "label:feature.node.kubernetes.io/pci-10de.present=true"
HARDWARE_GPU = "hardware:nvidia-gpu"
"""A fact of pools whose VMs have NVIDIA GPUs: what NFD's PCI source finds (vendor 10de)."""
OPERAND_LABELS = {"nvidia.com/gpu.deploy.container-toolkit": "true", "nvidia.com/gpu.deploy.device-plugin": "true",
                  "nvidia.com/gpu.deploy.dcgm-exporter": "true", "nvidia.com/gpu.deploy.dcgm": "true"}
CONTROL_PLANE_TOLERATION = {"key": "node-role.kubernetes.io/control-plane", "operator": "Equal", "value": "",
                            "effect": "NoSchedule"}


POD_IPS = "pod-ips"
"""A fact of pools whose CiliumNodes hold pod addresses: in `ipam: crd` (prefix mode) the prefix IPAM
controller publishes them; Cilium's agent reports ready, and pods get a network, only after."""


def chart_workloads(prefix_mode: bool = False) -> list[Workload]:
    """Pods the pinned charts deploy, with the values the library gives them."""
    op = gpu_operator_values()
    system = on_system_nodes("x")["nodeSelector"]
    daemonset_tolerations = tuple(op["daemonsets"]["tolerations"])
    return [
        Workload("cilium-agent", "DaemonSet", {}, ({"operator": "Exists"},), host_network=True,
                 gives=("cni",), gives_if=(("cni", POD_IPS),) if prefix_mode else (),
                 source="cilium chart: agent DaemonSet, hostNetwork, tolerations from values; with ipam: crd it "
                        "waits for addresses in its CiliumNode's spec.ipam.pool"),
        Workload("cilium-operator", "Deployment", system, ({"operator": "Exists"},), host_network=True,
                 source="cilium Helm reference: operator.tolerations default [{operator: Exists}] in every release "
                        "read (1.20's own page not read); hostNetwork"),
        Workload("kueue-controller-manager", "Deployment", system, (),
                 source="kueue 0.19.2 chart: controllerManager.tolerations default none"),
        Workload("gpu-operator", "Deployment", dict(op["operator"]["nodeSelector"]), (CONTROL_PLANE_TOLERATION,),
                 gives=tuple(f"label:{k}={v}" for k, v in OPERAND_LABELS.items()),
                 gives_if=tuple((f"label:{k}={v}", NFD_KEY) for k, v in OPERAND_LABELS.items()),
                 source="gpu-operator v26.3.3 values.yaml operator.tolerations: control-plane only"),
        Workload("nfd-master", "Deployment", dict(op["node-feature-discovery"]["master"]["nodeSelector"]),
                 (CONTROL_PLANE_TOLERATION,), source="NFD 0.18.3 chart master.tolerations: control-plane"),
        Workload("nfd-gc", "Deployment", dict(op["node-feature-discovery"]["gc"]["nodeSelector"]), (),
                 source="NFD 0.18.3 chart gc.tolerations: []"),
        Workload("nfd-worker", "DaemonSet", {}, tuple(op["node-feature-discovery"]["worker"]["tolerations"]),
                 gives=(NFD_KEY,), gives_if=((NFD_KEY, HARDWARE_GPU),),
                 source="gpu-operator v26.3.3 values.yaml node-feature-discovery.worker.tolerations (ours)"),
        Workload("nvidia-container-toolkit", "DaemonSet", {"nvidia.com/gpu.deploy.container-toolkit": "true"},
                 daemonset_tolerations, gives=("runtime:nvidia",),
                 source="gpu-operator: operands get daemonsets.tolerations (templates/clusterpolicy.yaml)"),
        Workload("nvidia-device-plugin", "DaemonSet", {"nvidia.com/gpu.deploy.device-plugin": "true"},
                 daemonset_tolerations, runtime_class="nvidia", gives=("gpu-allocatable",),
                 source="gpu-operator: device plugin runs with runtimeClassName nvidia"),
        Workload("nvidia-dcgm", "DaemonSet", {"nvidia.com/gpu.deploy.dcgm": "true"}, daemonset_tolerations,
                 runtime_class="nvidia", gives=("dcgm:nvidia-dcgm",),
                 source="gpu-operator v26.3.3 assets/state-dcgm (dcgm.enabled): host engine per GPU node"),
        Workload("nvidia-dcgm-exporter", "DaemonSet", {"nvidia.com/gpu.deploy.dcgm-exporter": "true"},
                 daemonset_tolerations, runtime_class="nvidia", source="gpu-operator: dcgm-exporter operand"),
    ]


def _pod(o: dict[str, Any]) -> dict[str, Any]:
    if o["kind"] == "CronJob":
        return o["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    return o["spec"]["template"]["spec"]


def own_workloads(plan: ClusterPlan) -> list[Workload]:
    azure = {"subscription_id": "", "tenant_id": "", "resource_group": "", "client_id": ""}
    objects = [*coredns_objects(plan.nodes, plan.system_nodes, str(plan.ip.dns_service_ip), plan.versions.minor),
               *autoscaler_objects(plan.spec.name, plan.nodes, 0.01, azure, plan.versions.minor),
               *balloon_objects(plan.balloons), *health_objects(plan.pools, plan.registry.agents_image),
               *(prefix_ipam_objects(azure, "api", 6443, plan.registry.agents_image) if plan.prefix_mode else []),
               *csr_approver_from_plan(plan)]
    found = []
    for o in objects:
        if o["kind"] not in ("Deployment", "DaemonSet"):
            continue
        pod = _pod(o)
        gpus = any(GPU_KEY in (c.get("resources", {}).get("requests") or {}) for c in pod["containers"])
        name = o["metadata"]["name"]
        health = o["kind"] == "DaemonSet" and name.startswith("gpu-health-")
        # The health checks reach the operator's host engine by its Service name (objects/health.py).
        needs = ("dns:cluster", "dcgm:nvidia-dcgm") if health else ()
        gives = (f"untaint:{PREFLIGHT_TAINT_KEY}",) if health else ("dns:cluster",) if name == "coredns" else (
            (POD_IPS,) if name == PREFIX_IPAM_APP else ())
        cpu, memory = requests(pod)
        affinity = pod.get("affinity") or {}
        terms = ((affinity.get("nodeAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get(
            "nodeSelectorTerms") or []
        anti = (affinity.get("podAntiAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution") or []
        found.append(Workload(name, o["kind"], dict(pod.get("nodeSelector") or {}),
                              tuple(pod.get("tolerations") or ()), bool(pod.get("hostNetwork")),
                              pod.get("runtimeClassName"), gpus, needs=needs, cpu_millis=cpu,
                              memory_mib=memory, gives=gives,
                              node_affinity=tuple(tuple(t.get("matchExpressions") or ()) for t in terms),
                              replicas=int(o["spec"].get("replicas", 1)),
                              one_per_node=any(t.get("topologyKey") == "kubernetes.io/hostname" for t in anti)))
    return found


GPU_KEY = "nvidia.com/gpu"
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
        scale_set = pool.scale_sets[0]
        taints = list(node_taints(pool))
        if registers_preflight(pool):
            taints.insert(0, NodeTaint(PREFLIGHT_TAINT_KEY, "pending", "NoSchedule"))
        states.append(PoolState(pool.name, node_labels(pool, scale_set, plan.spec.location), taints, pool.size.gpus,
                                facts={HARDWARE_GPU} if pool.size.gpus else set(),
                                cpu_millis=pool.size.vcpus * 1000,
                                memory_mib=pool.size.memory_gib * 1024 - EVICTION_HARD_MIB, nodes=pool.nodes))
    return states


def first_boot(plan: ClusterPlan, extra: list[Workload] | None = None,
               charts: list[Workload] | None = None) -> FirstBoot:
    """Simulate the layer's first boot; a stuck workload is a plan error naming it and its chain of waits."""
    boot = simulate(pool_states(plan), [*(chart_workloads(plan.prefix_mode) if charts is None else charts),
                                        *own_workloads(plan),
                                        *(extra or [])])
    # Before anything in the layer: the API servers answer (the first up's /readyz wait, planning/first_up.py).
    boot = FirstBoot((BootStep(0, "kube-apiserver (/readyz)", ("control plane",)), *boot.steps), boot.stuck)
    if boot.stuck:
        raise SpecError([Problem("cluster.inCluster", f"{s.workload} cannot start"
                                 f"{' on pool ' + s.pool if s.pool else ''}: {s.reason}") for s in boot.stuck])
    return boot
