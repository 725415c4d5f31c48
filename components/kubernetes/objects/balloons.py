"""Balloon Deployments: one per pool with a reserve, pause pods the size of a node."""

from __future__ import annotations

from components.bootstrap.node import LABEL_POOL, LABEL_ZONE
from components.catalog.in_cluster import PAUSE_IMAGE
from components.kubernetes.objects.common import LABEL_APP, Object, obj, toleration
from components.planning.balloons import BalloonPlan

NAMESPACE = "gpucluster-balloons"
GPU = "nvidia.com/gpu"
# The policy pack finds balloons by this label (well-known app.kubernetes.io/component).
LABEL_COMPONENT = "app.kubernetes.io/component"
COMPONENT = "balloon"


def balloon_deployment(b: BalloonPlan) -> Object:
    labels = {LABEL_APP: b.name, LABEL_COMPONENT: COMPONENT, LABEL_POOL: b.pool.name}
    resources = {"cpu": f"{b.cpu_millis}m", "memory": f"{b.memory_mib}Mi"}
    if b.gpus:
        resources[GPU] = str(b.gpus)
    selector = {"matchLabels": {LABEL_APP: b.name}}
    pod = {
        "priorityClassName": b.priority_class,
        # Preempted balloons must leave at once: a real pod is waiting for the node.
        "terminationGracePeriodSeconds": 0,
        "automountServiceAccountToken": False,
        "nodeSelector": {LABEL_POOL: b.pool.name},
        "tolerations": [toleration(t) for t in b.tolerations],
        "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": selector, "topologyKey": "kubernetes.io/hostname"}]}},
        "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": LABEL_ZONE, "whenUnsatisfiable": "ScheduleAnyway",
                                       "labelSelector": selector}],
        "containers": [{"name": "pause", "image": PAUSE_IMAGE, "resources": {"requests": resources, "limits": resources},
                        "securityContext": {"allowPrivilegeEscalation": False, "runAsNonRoot": True,
                                            "runAsUser": 65535, "capabilities": {"drop": ["ALL"]}}}],
    }
    return obj("apps/v1", "Deployment", b.name, NAMESPACE, labels=labels, spec={
        "replicas": b.replicas, "selector": selector,
        "template": {"metadata": {"labels": labels}, "spec": pod}})


def balloon_objects(balloons: tuple[BalloonPlan, ...]) -> list[Object]:
    if not balloons:
        return []
    return [obj("v1", "Namespace", NAMESPACE), *(balloon_deployment(b) for b in balloons)]
