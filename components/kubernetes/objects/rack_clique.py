"""The rack clique check's CronJob (agents/rack_clique.py) on clusters with rack pools: one
pod on the system pool every few minutes lists the rack nodes and taints those whose NVLink clique does not bear out
their rack label. Its account may change only that taint (a ValidatingAdmissionPolicy, as for the GPU health
accounts: RBAC cannot name the field a patch may touch)."""

from __future__ import annotations

from gpucluster.catalog.in_cluster import AGENTS_DIR
from gpucluster.kubernetes.objects.common import SYSTEM_PRIORITY_CLASS, Object, obj
from gpucluster.kubernetes.objects.health import NAMESPACE
from gpucluster.planning.placement import PoolPlan
from gpucluster.vocabulary import LABEL_APP, LABEL_ROLE, TAINT_RACK_UNPROVEN

APP = "gpucluster-rack-clique"
ACCOUNT = "rack-clique"
SCHEDULE = "*/5 * * * *"
"""Every five minutes: a rack node that joined (or whose clique changed) is judged within that."""


def _user() -> str:
    return f"system:serviceaccount:{NAMESPACE}:{ACCOUNT}"


def _only_taint(key: str) -> str:
    """CEL: nothing of the node changes but taints with `key` (core CEL only: cel-python evaluates it in tests)."""
    kept = f"filter(t, t.key != '{key}')"
    def either(path: str, empty: str) -> str:
        parent, _, field = path.rpartition(".")
        return f"(has({parent}.{field}) ? {path} : {empty})"
    return " && ".join([
        f"{either('object.spec.taints', '[]')}.{kept} == {either('oldObject.spec.taints', '[]')}.{kept}",
        f"{either('object.metadata.labels', '{}')} == {either('oldObject.metadata.labels', '{}')}",
        f"{either('object.metadata.annotations', '{}')} == {either('oldObject.metadata.annotations', '{}')}",
        f"{either('object.spec.unschedulable', 'false')} == {either('oldObject.spec.unschedulable', 'false')}"])


def rack_clique_policy() -> list[Object]:
    api = "admissionregistration.k8s.io/v1"
    policy = obj(api, "ValidatingAdmissionPolicy", APP, spec={
        "failurePolicy": "Fail",
        "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["UPDATE"],
                                                "resources": ["nodes"]}]},
        "matchConditions": [{"name": "rack-clique-account", "expression": f"request.userInfo.username == '{_user()}'"}],
        "validations": [{"expression": _only_taint(TAINT_RACK_UNPROVEN),
                         "message": f"the rack clique check may change only the {TAINT_RACK_UNPROVEN} taint"}]})
    return [policy, obj(api, "ValidatingAdmissionPolicyBinding", APP, spec={
        "policyName": APP, "validationActions": ["Deny"]})]


def rack_clique_objects(pools: tuple[PoolPlan, ...], image: str) -> list[Object]:
    racks = sorted(p.name for p in pools if p.racks is not None)
    if not racks:
        return []
    rbac = "rbac.authorization.k8s.io/v1"
    role = f"gpucluster:{ACCOUNT}"
    container = {
        "name": "check", "image": image,
        "command": ["python3", f"{AGENTS_DIR}/rack_clique.py", "check", ",".join(racks)],
        "resources": {"requests": {"cpu": "10m", "memory": "64Mi"}, "limits": {"memory": "128Mi"}},
        "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                            "runAsNonRoot": True, "runAsUser": 65534, "capabilities": {"drop": ["ALL"]}}}
    return [
        obj("v1", "ServiceAccount", ACCOUNT, NAMESPACE),
        obj(rbac, "ClusterRole", role, rules=[
            {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "patch"]}]),
        obj(rbac, "ClusterRoleBinding", role, roleRef={"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                                       "name": role},
            subjects=[{"kind": "ServiceAccount", "name": ACCOUNT, "namespace": NAMESPACE}]),
        *rack_clique_policy(),
        obj("batch/v1", "CronJob", APP, NAMESPACE, labels={LABEL_APP: APP}, spec={
            "schedule": SCHEDULE, "concurrencyPolicy": "Forbid",
            "successfulJobsHistoryLimit": 1, "failedJobsHistoryLimit": 3,
            "jobTemplate": {"spec": {"backoffLimit": 1, "activeDeadlineSeconds": 240, "template": {"spec": {
                "serviceAccountName": ACCOUNT, "restartPolicy": "Never", "priorityClassName": SYSTEM_PRIORITY_CLASS,
                "nodeSelector": {LABEL_ROLE: "system"}, "containers": [container]}}}}}),
    ]
