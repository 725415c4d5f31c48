"""The prefix IPAM controller (scripts/prefix_ipam.py) as cluster objects: a leader-elected Deployment on the
system pool, on the host network, with the least Kubernetes rights its calls need and its own Azure identity
(components/catalog/addon_permissions.py PREFIX_IPAM, one NIC read per scale set)."""

from __future__ import annotations

from typing import Any

from gpucluster.catalog.in_cluster import AGENTS_DIR
from gpucluster.kubernetes.objects.common import Object, obj, on_system_nodes, pod_disruption_budget
from gpucluster.vocabulary import LABEL_APP

NAMESPACE = "kube-system"
APP = "gpucluster-prefix-ipam"
LEASE = APP
RBAC = "rbac.authorization.k8s.io/v1"


def prefix_ipam_objects(azure: dict[str, Any], api_host: str, api_port: int, image: str) -> list[Object]:
    """`azure` is AddonAzureRefs.settings() of the controller's identity; `image` the agents image as the
    cluster's registry serves it (agents/Dockerfile)."""
    placement = on_system_nodes(APP)
    labels = {LABEL_APP: APP}
    container = {
        "name": "controller", "image": image,
        "command": ["python3", f"{AGENTS_DIR}/prefix_ipam.py", NAMESPACE, LEASE],
        "env": [{"name": "AZURE_CLIENT_ID", "value": azure["client_id"]},
                {"name": "KUBE_API", "value": f"https://{api_host}:{api_port}"},
                {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
        "resources": {"requests": {"cpu": "50m", "memory": "128Mi"}, "limits": {"memory": "512Mi"}},
        "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                            "runAsNonRoot": True, "runAsUser": 65534, "capabilities": {"drop": ["ALL"]}},
    }
    pod = {
        # The node's resolver: management.azure.com must resolve before any pod has an address, and cluster DNS
        # (CoreDNS) runs on pod addresses this controller hands out.
        "serviceAccountName": APP, "hostNetwork": True, "dnsPolicy": "Default",
        "priorityClassName": placement["priorityClassName"], "nodeSelector": placement["nodeSelector"],
        "topologySpreadConstraints": placement["topologySpreadConstraints"],
        # Before any pod address exists, nodes still carry the taints Cilium's agent tolerates: so does this.
        "tolerations": [{"operator": "Exists"}],
        "containers": [container],
    }
    return [
        obj("v1", "ServiceAccount", APP, NAMESPACE),
        # Reads nodes' providerIDs, writes CiliumNode pools; nothing else cluster-wide. After one list every round
        # is a watch, which kube-apiserver authorizes as its own verb (k8s.io/apiserver pkg/endpoints/request/
        # requestinfo.go: a GET on a collection with `watch` set is `watch`, not `list`).
        obj(RBAC, "ClusterRole", APP, rules=[
            {"apiGroups": [""], "resources": ["nodes"], "verbs": ["list", "watch"]},
            {"apiGroups": ["cilium.io"], "resources": ["ciliumnodes"], "verbs": ["list", "watch", "patch"]}]),
        obj(RBAC, "ClusterRoleBinding", APP, roleRef={"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                                      "name": APP},
            subjects=[{"kind": "ServiceAccount", "name": APP, "namespace": NAMESPACE}]),
        # Its own Lease only.
        obj(RBAC, "Role", APP, NAMESPACE, rules=[
            {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
            {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "resourceNames": [LEASE],
             "verbs": ["get", "update"]}]),
        obj(RBAC, "RoleBinding", APP, NAMESPACE, roleRef={"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                                          "name": APP},
            subjects=[{"kind": "ServiceAccount", "name": APP, "namespace": NAMESPACE}]),
        obj("apps/v1", "Deployment", APP, NAMESPACE, labels=labels, spec={
            "replicas": 2, "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": pod}}),
        pod_disruption_budget(APP, NAMESPACE, APP),
    ]
