"""Gang scheduling with scheduler-plugins' Coscheduling, run as the cluster's only scheduler.

The scheduler profile replaces kube-scheduler on the control-plane VMs (the image of the kubeadm
static pod is patched), so no second scheduler races the default one for the same nodes. In the
cluster: the PodGroup CRD, RBAC that lets the scheduler (user system:kube-scheduler) read
PodGroups, and the scheduler-plugins controller that keeps PodGroup status.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import yaml

from components.catalog.in_cluster import (
    SCHEDULER_PLUGINS_CONTROLLER_IMAGE,
    SCHEDULER_PLUGINS_NAMESPACE,
    SCHEDULER_PLUGINS_VERSION,
)
from components.kubernetes.objects.common import LABEL_APP, Object, obj, on_system_nodes
from components.planning.scheduling import GPU

CRD_DIR = Path(__file__).resolve().parent.parent / "crds" / f"scheduler-plugins-{SCHEDULER_PLUGINS_VERSION}"
POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
SCHEDULER_CONFIG_PATH = "/etc/kubernetes/scheduler-config.yaml"
CONTROLLER = "scheduler-plugins-controller"
GPU_WEIGHT = 5
"""Bin-pack GPUs hardest: a half-used GPU node blocks a whole-node job; CPU and memory weigh 1."""


def scheduler_configuration(gang_timeout_seconds: int) -> dict[str, Any]:
    """KubeSchedulerConfiguration of the control plane's scheduler: Coscheduling + MostAllocated."""
    return {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"kubeconfig": "/etc/kubernetes/scheduler.conf", "qps": 300, "burst": 400},
        "leaderElection": {"leaderElect": True},
        "profiles": [{
            "schedulerName": "default-scheduler",
            "plugins": {
                "multiPoint": {"enabled": [{"name": "Coscheduling"}]},
                # Coscheduling sorts the queue so a gang's pods are tried together.
                "queueSort": {"enabled": [{"name": "Coscheduling"}], "disabled": [{"name": "*"}]},
            },
            "pluginConfig": [
                {"name": "Coscheduling", "args": {"permitWaitingTimeSeconds": gang_timeout_seconds}},
                {"name": "NodeResourcesFit", "args": {"scoringStrategy": {
                    "type": "MostAllocated",
                    "resources": [{"name": GPU, "weight": GPU_WEIGHT}, {"name": "cpu", "weight": 1},
                                  {"name": "memory", "weight": 1}]}}},
            ],
        }],
    }


@cache
def pod_group_crd() -> Object:
    return yaml.safe_load((CRD_DIR / "scheduling.x-k8s.io_podgroups.yaml").read_text())


def scheduler_rbac() -> list[Object]:
    """What the Coscheduling plugin reads beyond the built-in system:kube-scheduler role."""
    name = "gpucluster:scheduler-plugins"
    return [
        obj("rbac.authorization.k8s.io/v1", "ClusterRole", name, rules=[
            {"apiGroups": ["scheduling.x-k8s.io"], "resources": ["podgroups", "elasticquotas"],
             "verbs": ["get", "list", "watch"]},
            {"apiGroups": ["scheduling.x-k8s.io"], "resources": ["podgroups/status"], "verbs": ["patch", "update"]},
        ]),
        obj("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", name,
            roleRef={"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
            subjects=[{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "system:kube-scheduler"}]),
    ]


def controller_objects() -> list[Object]:
    """The PodGroup controller: computes PodGroup phase from its pods."""
    ns = SCHEDULER_PLUGINS_NAMESPACE
    labels = {LABEL_APP: CONTROLLER}
    pod_spec = {
        "serviceAccountName": CONTROLLER,
        **on_system_nodes(CONTROLLER),
        "containers": [{
            "name": "controller",
            "image": SCHEDULER_PLUGINS_CONTROLLER_IMAGE,
            "imagePullPolicy": "IfNotPresent",
            # two replicas over two zones; the Lease (kube-system/sched-plugins-controllers) picks the active one
            "args": ["--enableLeaderElection=true"],
            "resources": {"requests": {"cpu": "500m", "memory": "512Mi"}, "limits": {"memory": "1Gi"}},
            "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                                "runAsNonRoot": True, "capabilities": {"drop": ["ALL"]}},
        }],
    }
    return [
        obj("v1", "Namespace", ns),
        obj("v1", "ServiceAccount", CONTROLLER, ns),
        obj("rbac.authorization.k8s.io/v1", "ClusterRole", CONTROLLER, rules=[
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]},
            {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch", "update"]},
            {"apiGroups": ["scheduling.x-k8s.io"], "resources": ["podgroups", "elasticquotas"],
             "verbs": ["get", "list", "watch", "update", "patch"]},
            {"apiGroups": ["scheduling.x-k8s.io"], "resources": ["podgroups/status", "elasticquotas/status"],
             "verbs": ["get", "update", "patch"]},
            {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create", "get", "update"]},
        ]),
        obj("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", CONTROLLER,
            roleRef={"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": CONTROLLER},
            subjects=[{"kind": "ServiceAccount", "name": CONTROLLER, "namespace": ns}]),
        obj("apps/v1", "Deployment", CONTROLLER, ns, labels=labels, spec={
            "replicas": 2,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": pod_spec},
        }),
    ]


def gang_objects() -> list[Object]:
    return [pod_group_crd(), *scheduler_rbac(), *controller_objects()]
