"""GPU health: active DCGM diagnostics before a node takes work, passive DCGM health watches after,
and a CronJob that sends idle nodes through the active checks again. One DaemonSet and CronJob per
GPU pool (nodes of a pool are alike; the recheck budget is per pool)."""

from __future__ import annotations

import math

from gpucluster.agents.health_agent import API_CALLS_PER_MINUTE
from gpucluster.catalog.in_cluster import AGENTS_DIR, DCGM_IMAGE
from gpucluster.kubernetes.objects.common import SYSTEM_PRIORITY_CLASS, Object, obj
from gpucluster.planning.placement import PoolPlan
from gpucluster.vocabulary import (
    ANNOTATION_API_CALLS,
    LABEL_APP,
    LABEL_POOL,
    LABEL_ROLE,
    NODE_NAME_CLAIM,
    TAINT_PREFLIGHT,
    TAINT_UNHEALTHY,
)

NAMESPACE = "gpucluster-health"
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
    """The agent container (the project's agents image, agents/Dockerfile); on a node (DaemonSet) it is
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
        "serviceAccountName": AGENT_ACCOUNT,
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
            "serviceAccountName": RECHECK_ACCOUNT, "restartPolicy": "Never", "priorityClassName": SYSTEM_PRIORITY_CLASS,
            "nodeSelector": {LABEL_ROLE: "system"},
            "containers": [container],
            "volumes": [{"name": "shared", "emptyDir": {}}]}}}}})


AGENT_ACCOUNT = "gpu-health-agent"
RECHECK_ACCOUNT = "gpu-health-recheck"
POLICY = "gpucluster-gpu-health-nodes"


def _user(account: str) -> str:
    return f"system:serviceaccount:{NAMESPACE}:{account}"


def _or_empty(path: str, empty: str) -> str:
    """`path` when the object has it, else `empty`: `has()` is core CEL (the optional `.?` syntax is a cel-go
    library other CEL engines lack, so tests can evaluate these expressions with cel-python)."""
    parent, _, field = path.rpartition(".")
    return f"(has({parent}.{field}) ? {path} : {empty})"


def _others_unchanged(keys: tuple[str, ...]) -> str:
    """CEL: nothing of the node changes but taints with `keys` (labels, annotations, cordon, other taints)."""
    listed = ", ".join(f"'{k}'" for k in keys)
    kept = f"filter(t, !(t.key in [{listed}]))"
    return (f"{_or_empty('object.spec.taints', '[]')}.{kept} == {_or_empty('oldObject.spec.taints', '[]')}.{kept} && "
            f"{_or_empty('object.metadata.labels', '{}')} == {_or_empty('oldObject.metadata.labels', '{}')} && "
            f"{_or_empty('object.metadata.annotations', '{}')} == "
            f"{_or_empty('oldObject.metadata.annotations', '{}')} && "
            f"{_or_empty('object.spec.unschedulable', 'false')} == {_or_empty('oldObject.spec.unschedulable', 'false')}")


def node_policy() -> list[Object]:
    """RBAC cannot name the node a request may touch, so the agent's `patch nodes` would reach every node: this
    ValidatingAdmissionPolicy (admissionregistration.k8s.io/v1, GA in 1.30) lets the agent's account change only the
    node its token was issued on, and only our two taints there; the recheck's account only the preflight taint."""
    agent, recheck = _user(AGENT_ACCOUNT), _user(RECHECK_ACCOUNT)
    policy = obj("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy", POLICY, spec={
        "failurePolicy": "Fail",
        "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["UPDATE"],
                                                "resources": ["nodes"]}]},
        "matchConditions": [{"name": "gpu-health-accounts",
                             "expression": f"request.userInfo.username in ['{agent}', '{recheck}']"}],
        "validations": [
            {"expression": f"request.userInfo.username != '{agent}' || (has(request.userInfo.extra) && "
                           f"'{NODE_NAME_CLAIM}' in request.userInfo.extra && "
                           f"request.userInfo.extra['{NODE_NAME_CLAIM}'] == [object.metadata.name])",
             "message": "the GPU health agent may change only the node it runs on"},
            {"expression": f"request.userInfo.username != '{agent}' || "
                           + _others_unchanged((TAINT_PREFLIGHT, TAINT_UNHEALTHY)),
             "message": f"the GPU health agent may change only the {TAINT_PREFLIGHT} and {TAINT_UNHEALTHY} taints"},
            {"expression": f"request.userInfo.username != '{recheck}' || " + _others_unchanged((TAINT_PREFLIGHT,)),
             "message": f"the GPU recheck may change only the {TAINT_PREFLIGHT} taint"},
        ]})
    binding = obj("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBinding", POLICY, spec={
        "policyName": POLICY, "validationActions": ["Deny"]})
    return [policy, binding]


def _binding(kind: str, name: str, account: str, namespace: str | None = None) -> Object:
    role_kind = "ClusterRole" if kind == "ClusterRoleBinding" else "Role"
    return obj("rbac.authorization.k8s.io/v1", kind, name, namespace,
               roleRef={"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": name},
               subjects=[{"kind": "ServiceAccount", "name": account, "namespace": NAMESPACE}])


def health_objects(pools: tuple[PoolPlan, ...], image: str) -> list[Object]:
    """`image` is the agents image as the cluster's registry serves it (RegistryPlan.agents_image). Two accounts,
    each with its own calls only: the agent (every GPU node) reads and patches nodes, limited by `node_policy` to
    its own node's two taints; the recheck (one CronJob pod) lists nodes and pods (per node, by field selector:
    RBAC cannot limit a list by field) and deletes agent pods in this namespace."""
    gpu_pools = [p for p in pools if p.size.gpus]
    if not gpu_pools:
        return []
    return health_access() + [o for p in gpu_pools for o in (health_daemonset(p, image), recheck_cronjob(p, image))]


def health_access() -> list[Object]:
    """The namespace, both accounts, their roles and the node policy: the same on every cluster with GPU pools."""
    rbac = "rbac.authorization.k8s.io/v1"
    return [
        obj("v1", "Namespace", NAMESPACE),
        obj("v1", "ServiceAccount", AGENT_ACCOUNT, NAMESPACE),
        obj("v1", "ServiceAccount", RECHECK_ACCOUNT, NAMESPACE),
        obj(rbac, "ClusterRole", "gpucluster:gpu-health-agent", rules=[
            {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "patch"]}]),
        _binding("ClusterRoleBinding", "gpucluster:gpu-health-agent", AGENT_ACCOUNT),
        obj(rbac, "ClusterRole", "gpucluster:gpu-health-recheck", rules=[
            {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "patch"]},
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}]),
        _binding("ClusterRoleBinding", "gpucluster:gpu-health-recheck", RECHECK_ACCOUNT),
        # Deleting agent pods (to re-run active checks) only in its own namespace.
        obj(rbac, "Role", "gpu-health-recheck", NAMESPACE, rules=[
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["delete"]}]),
        _binding("RoleBinding", "gpu-health-recheck", RECHECK_ACCOUNT, NAMESPACE),
        *node_policy(),
    ]
