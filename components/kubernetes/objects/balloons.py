"""Balloon Deployments: one per pool with a reserve, pause pods the size of a node."""

from __future__ import annotations

from gpucluster.catalog.in_cluster import PAUSE_IMAGE
from gpucluster.kubernetes.objects.common import Object, obj, toleration
from gpucluster.planning.balloons import BalloonPlan
from gpucluster.vocabulary import GPU_RESOURCE, LABEL_APP, LABEL_COMPONENT, LABEL_HOSTNAME, LABEL_POOL, LABEL_ZONE

NAMESPACE = "gpucluster-balloons"
# The policy pack finds balloons by this label (well-known app.kubernetes.io/component).
COMPONENT = "balloon"


def balloon_deployment(b: BalloonPlan) -> Object:
    labels = {LABEL_APP: b.name, LABEL_COMPONENT: COMPONENT, LABEL_POOL: b.pool.name}
    resources = {"cpu": f"{b.cpu_millis}m", "memory": f"{b.memory_mib}Mi"}
    if b.gpus:
        resources[GPU_RESOURCE] = str(b.gpus)
    selector = {"matchLabels": {LABEL_APP: b.name}}
    pod = {
        "priorityClassName": b.priority_class,
        # Preempted balloons must leave at once: a real pod is waiting for the node.
        "terminationGracePeriodSeconds": 0,
        "automountServiceAccountToken": False,
        "nodeSelector": {LABEL_POOL: b.pool.name},
        "tolerations": [toleration(t) for t in b.tolerations],
        "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": selector, "topologyKey": LABEL_HOSTNAME}]}},
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
