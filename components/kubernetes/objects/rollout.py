"""The rollout controller (scripts/rollout.py) as cluster objects: the plan's node waves as the ConfigMap it reads, a
leader-elected Deployment on the system pool (two replicas spread over zones) and the least Kubernetes rights its
calls need (verbs as the API server's request info names them: GET of a collection is `list`, of an object `get`;
POST `create`, PUT `update`, PATCH `patch`; kubernetes staging/src/k8s.io/apiserver/pkg/endpoints/request/
requestinfo.go).

Its Azure identity holds the custom role components/catalog/addon_permissions.py ROLLOUT (components/azure/
addon_identities.py)."""

from __future__ import annotations

import json
from typing import Any

from gpucluster.agents.rollout import DEFAULT_NAMESPACE as NAMESPACE
from gpucluster.agents.rollout import LEASE, PLAN_CONFIGMAP, STATE_CONFIGMAP
from gpucluster.catalog.in_cluster import AGENTS_DIR
from gpucluster.kubernetes.objects.common import Object, obj, on_system_nodes, pod_disruption_budget
from gpucluster.planning.fence import FENCE
from gpucluster.planning.rollout import RolloutPlan
from gpucluster.vocabulary import LABEL_APP

APP = "gpucluster-rollout"
RBAC = "rbac.authorization.k8s.io/v1"
KUEUE = "kueue.x-k8s.io"


def plan_document(rollout: RolloutPlan) -> str:
    """What the controller reads from the ConfigMap's `plan.json`: the order and the rules, never what to re-image
    (that is what Azure says each instance runs): the waves with their scale sets, whether a pool's flavor is
    topology-aware and whether the GPU health agent runs there, each wave's drain deadline and time estimate, and the
    fence."""
    return json.dumps({
        "waves": [{"index": w.index, "kind": w.kind, "pool": w.pool, "zone": w.zone, "scaleSets": list(w.scale_sets),
                   "instance": w.instance, "topology": w.topology, "preflight": w.preflight,
                   "drainMinutes": w.drain_minutes, "minutes": w.minutes} for w in rollout.waves],
        "fence": {"label": FENCE.label, "open": FENCE.open, "fenced": FENCE.fenced},
    }, sort_keys=True, separators=(",", ":"))


def rollout_objects(rollout: RolloutPlan, azure: dict[str, Any], image: str, api_host: str, api_port: int) -> list[Object]:
    """`azure`: the controller identity's client id, subscription and resource group (`client_id`,
    `subscription_id`, `resource_group`); `image`: the agents image as the cluster's registry serves it. On the host
    network, as the prefix IPAM controller: it reaches IMDS for its token (the IMDS guard governs the pod network,
    objects/imds_guard.py) and the API server by its name through the node's resolver."""
    placement = on_system_nodes(APP)
    labels = {LABEL_APP: APP}
    container = {
        "name": "controller", "image": image, "command": ["python3", f"{AGENTS_DIR}/rollout.py"],
        "env": [{"name": "AZURE_CLIENT_ID", "value": azure["client_id"]},
                {"name": "AZURE_SUBSCRIPTION_ID", "value": azure["subscription_id"]},
                {"name": "AZURE_RESOURCE_GROUP", "value": azure["resource_group"]},
                {"name": "KUBE_API", "value": f"https://{api_host}:{api_port}"},
                {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
        "resources": {"requests": {"cpu": "20m", "memory": "64Mi"}, "limits": {"memory": "256Mi"}},
        "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                            "runAsNonRoot": True, "runAsUser": 65534, "capabilities": {"drop": ["ALL"]}},
    }
    pod = {"serviceAccountName": APP, "hostNetwork": True, "dnsPolicy": "Default",
           "priorityClassName": placement["priorityClassName"],
           "nodeSelector": placement["nodeSelector"], "topologySpreadConstraints": placement["topologySpreadConstraints"],
           "containers": [container]}
    binding = {"kind": "ServiceAccount", "name": APP, "namespace": NAMESPACE}
    return [
        obj("v1", "ConfigMap", PLAN_CONFIGMAP, NAMESPACE, data={"plan.json": plan_document(rollout)}),
        obj("v1", "ServiceAccount", APP, NAMESPACE),
        # Fence, cordon and taint nodes, annotate the pods on them and evict the ones no Workload holds (the
        # Eviction API: PodDisruptionBudgets decide), deactivate and reactivate the Workloads placed there.
        obj(RBAC, "ClusterRole", APP, rules=[
            {"apiGroups": [""], "resources": ["nodes"], "verbs": ["list", "patch"]},
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "patch"]},
            {"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]},
            {"apiGroups": [KUEUE], "resources": ["workloads"], "verbs": ["list", "patch"]}]),
        obj(RBAC, "ClusterRoleBinding", APP, roleRef={"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                                      "name": APP}, subjects=[binding]),
        # Its plan, its state and its Lease only (create cannot be limited by name).
        obj(RBAC, "Role", APP, NAMESPACE, rules=[
            {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": [PLAN_CONFIGMAP], "verbs": ["get"]},
            {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": [STATE_CONFIGMAP],
             "verbs": ["get", "update"]},
            {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create"]},
            {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
            {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "resourceNames": [LEASE],
             "verbs": ["get", "update"]}]),
        obj(RBAC, "RoleBinding", APP, NAMESPACE, roleRef={"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                                          "name": APP}, subjects=[binding]),
        obj("apps/v1", "Deployment", APP, NAMESPACE, labels=labels, spec={
            "replicas": 2, "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": pod}}),
        pod_disruption_budget(APP, NAMESPACE, APP),
    ]
