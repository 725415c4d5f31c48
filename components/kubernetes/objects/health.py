"""GPU health: active DCGM diagnostics before a node takes work, passive DCGM health watches after,
and a CronJob that sends idle nodes through the active checks again. One DaemonSet and CronJob per
GPU pool (nodes of a pool are alike; the recheck budget is per pool)."""

from __future__ import annotations

import math

from components.catalog.in_cluster import AGENTS_DIR, DCGM_IMAGE
from components.kubernetes.objects.common import SYSTEM_PRIORITY_CLASS, Object, obj
from components.kubernetes.scripts.health_agent import API_CALLS_PER_MINUTE
from components.planning.placement import PoolPlan
from components.vocabulary import ANNOTATION_API_CALLS, LABEL_APP, LABEL_POOL, LABEL_ROLE

NAMESPACE = "gpucluster-health"
ACCOUNT = "gpu-health"
"""The node agent's account: its own node, read and patched by name; no list, no watch."""
RECHECK_ACCOUNT = "gpu-health-recheck"
"""The hourly CronJob's: lists a pool's nodes and the running pods, deletes agent pods in its namespace."""
RECHECK_SHARE = 0.02
"""At most this share of a pool's nodes is taken out for re-checks per run."""
RECHECK_SCHEDULE = "17 * * * *"

DCGM_HOST = "nvidia-dcgm.gpu-operator.svc"
"""The GPU operator's own DCGM host engine on this node (dcgm.enabled: its Service `nvidia-dcgm` has
internalTrafficPolicy Local, gpu-operator v26.3.3 assets/state-dcgm): one host engine per node, shared
with the DCGM exporter, instead of a second nv-hostengine in the health pod."""
DIAG = (f"until dcgmi discovery -l --host {DCGM_HOST} >/dev/null; do sleep 5; done; "
        f"dcgmi diag -r 2 -j --host {DCGM_HOST} > /shared/diag.json; echo $? > /shared/diag.exit; exit 0")
WATCH = (f"until dcgmi health -g 0 -s a --host {DCGM_HOST}; do sleep 5; done; "
         f"while true; do dcgmi health -g 0 -c -j --host {DCGM_HOST} > /shared/health.tmp "
         "&& mv /shared/health.tmp /shared/health.json; sleep 60; done")


def _agent(image: str, args: list[str], on_node: bool = True) -> dict[str, object]:
    """The agent container (the project's agents image, images/agents/Dockerfile); on a node (DaemonSet) it is
    told which node it is on."""
    return {
        "image": image, "command": ["python3", f"{AGENTS_DIR}/health_agent.py", *args],
        "env": [{"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}] if on_node else [],
        "volumeMounts": [{"name": "shared", "mountPath": "/shared"}],
        "resources": {"requests": {"cpu": "10m", "memory": "64Mi"}, "limits": {"memory": "128Mi"}},
        "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                            "runAsNonRoot": True, "runAsUser": 65534, "capabilities": {"drop": ["ALL"]}},
    }


def _dcgm(name: str, script: str) -> dict[str, object]:
    """A dcgmi client of the node's host engine: needs no GPU access and no privileges of its own."""
    return {"name": name, "image": DCGM_IMAGE, "command": ["bash", "-c", script],
            "volumeMounts": [{"name": "shared", "mountPath": "/shared"}],
            "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"memory": "2Gi"}},
            "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}}


def agent_app(pool: PoolPlan) -> str:
    return f"gpu-health-{pool.name}"


def health_daemonset(pool: PoolPlan, image: str) -> Object:
    app = agent_app(pool)
    labels = {LABEL_APP: app, LABEL_POOL: pool.name}
    gate = {"name": "gate", **_agent(image, ["gate"])}
    pod = {
        "serviceAccountName": ACCOUNT,
        "priorityClassName": SYSTEM_PRIORITY_CLASS,
        "nodeSelector": {LABEL_POOL: pool.name},
        # Runs where nothing else may: on preflight-tainted, pool-tainted and unhealthy nodes.
        "tolerations": [{"operator": "Exists"}],
        "initContainers": [gate, _dcgm("diagnostics", f"if [ \"$(cat /shared/run-diag)\" = yes ]; then {DIAG}; fi")],
        "containers": [_dcgm("health-watch", WATCH), {"name": "agent", **_agent(image, ["agent"])}],
        "volumes": [{"name": "shared", "emptyDir": {}}],
    }
    daemonset = obj("apps/v1", "DaemonSet", app, NAMESPACE, labels=labels, spec={
        "selector": {"matchLabels": {LABEL_APP: app}},
        "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "10%"}},
        "template": {"metadata": {"labels": labels}, "spec": pod}})
    daemonset["metadata"]["annotations"] = {ANNOTATION_API_CALLS: f"{API_CALLS_PER_MINUTE:g}"}
    return daemonset


def recheck_limit(pool: PoolPlan) -> int:
    return max(1, math.floor(pool.nodes * RECHECK_SHARE))


def recheck_cronjob(pool: PoolPlan, image: str) -> Object:
    name = f"gpu-recheck-{pool.name}"
    container = {"name": "recheck", **_agent(image, ["recheck", pool.name, str(recheck_limit(pool)), NAMESPACE,
                                              agent_app(pool)], on_node=False)}
    return obj("batch/v1", "CronJob", name, NAMESPACE, labels={LABEL_APP: name}, spec={
        "schedule": RECHECK_SCHEDULE, "concurrencyPolicy": "Forbid",
        "successfulJobsHistoryLimit": 1, "failedJobsHistoryLimit": 3,
        "jobTemplate": {"spec": {"backoffLimit": 1, "activeDeadlineSeconds": 600, "template": {"spec": {
            "serviceAccountName": RECHECK_ACCOUNT, "restartPolicy": "Never",
            "priorityClassName": SYSTEM_PRIORITY_CLASS,
            "nodeSelector": {LABEL_ROLE: "system"},
            "containers": [container],
            "volumes": [{"name": "shared", "emptyDir": {}}]}}}}})


def health_objects(pools: tuple[PoolPlan, ...], image: str) -> list[Object]:
    """`image` is the agents image as the cluster's registry serves it (RegistryPlan.agents_image)."""
    gpu_pools = [p for p in pools if p.size.gpus]
    if not gpu_pools:
        return []
    shared = [
        obj("v1", "Namespace", NAMESPACE),
        obj("v1", "ServiceAccount", ACCOUNT, NAMESPACE),
        obj("v1", "ServiceAccount", RECHECK_ACCOUNT, NAMESPACE),
        # The agent on every node: its own node by name (RBAC cannot name "this node"; it never lists or watches).
        obj("rbac.authorization.k8s.io/v1", "ClusterRole", "gpucluster:gpu-health", rules=[
            {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "patch"]}]),
        obj("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "gpucluster:gpu-health",
            roleRef={"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "gpucluster:gpu-health"},
            subjects=[{"kind": "ServiceAccount", "name": ACCOUNT, "namespace": NAMESPACE}]),
        # The hourly re-check (one pod): a pool's nodes and the running pods, to find idle nodes.
        obj("rbac.authorization.k8s.io/v1", "ClusterRole", "gpucluster:gpu-health-recheck", rules=[
            {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "patch"]},
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}]),
        obj("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "gpucluster:gpu-health-recheck",
            roleRef={"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                     "name": "gpucluster:gpu-health-recheck"},
            subjects=[{"kind": "ServiceAccount", "name": RECHECK_ACCOUNT, "namespace": NAMESPACE}]),
        # Deleting agent pods (to re-run active checks) only in its own namespace.
        obj("rbac.authorization.k8s.io/v1", "Role", "gpu-health-recheck", NAMESPACE, rules=[
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "delete"]}]),
        obj("rbac.authorization.k8s.io/v1", "RoleBinding", "gpu-health-recheck", NAMESPACE,
            roleRef={"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "gpu-health-recheck"},
            subjects=[{"kind": "ServiceAccount", "name": RECHECK_ACCOUNT, "namespace": NAMESPACE}]),
    ]
    return shared + [o for p in gpu_pools for o in (health_daemonset(p, image), recheck_cronjob(p, image))]
