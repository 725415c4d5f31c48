"""cluster-autoscaler for Azure scale sets, discovering node groups by the tags the node pools set."""

from __future__ import annotations

import math
from typing import Any

from gpucluster.catalog.in_cluster import cluster_autoscaler_image
from gpucluster.kubernetes.objects.common import Object, obj, on_system_nodes
from gpucluster.planning.scheduling import AUTOSCALER_EXPENDABLE_CUTOFF
from gpucluster.vocabulary import (
    AUTOSCALER_ENABLED_TAG,
    AUTOSCALER_NAME_TAG,
    LABEL_APP,
    TAINT_PREFLIGHT,
    TAINT_UNHEALTHY,
)

NAMESPACE = "kube-system"
APP = "cluster-autoscaler"
LEASE = "cluster-autoscaler"
"""component-base v0.36.2 config/options/leaderelectionconfig.go `leader-elect-resource-name`, bound by
cluster-autoscaler 1.36.1 main.go (BindLeaderElectionFlags; default "cluster-autoscaler", lock in --namespace)."""
MAX_UNREADY_PERCENT = 10
"""Above this share of unready nodes the autoscaler stops acting: a network or control-plane fault
makes healthy nodes look unready, and deleting them is how a partial outage becomes a full one."""
OK_TOTAL_UNREADY_COUNT = 3
"""Unready nodes always tolerated, whatever the share (the flag's default)."""


def max_scale_down_parallelism(nodes: int, share: float) -> int:
    return max(1, math.floor(nodes * share))


def autoscaler_args(cluster: str, nodes: int, share: float, control_plane_nodes: int = 0) -> list[str]:
    """Flags as cluster-autoscaler 1.36 reads them (config/flags/flags.go)."""
    parallel = max_scale_down_parallelism(nodes, share)
    return [
        "--cloud-provider=azure",
        f"--node-group-auto-discovery=label:{AUTOSCALER_ENABLED_TAG}=true,{AUTOSCALER_NAME_TAG}={cluster}",
        # Balloons sit exactly at the cutoff: they still trigger scale-up; anything lower would not.
        f"--expendable-pods-priority-cutoff={AUTOSCALER_EXPENDABLE_CUTOFF}",
        # Balancing spreads one scale-up over "similar" node groups. Each GPU scale set is one InfiniBand domain with
        # its own `gpucluster.io/infiniband-domain` value, which is NOT ignored: two domains are never similar, so a gang's
        # scale-up stays in one domain. CPU scale sets share the value "none" and differ only by zone, which
        # cluster-autoscaler ignores itself (processors/nodegroupset/compare_nodegroups.go BasicIgnoredLabels):
        # they are still balanced across zones.
        "--balance-similar-node-groups=true",
        # New GPU nodes carry the preflight taint while their diagnostics run: a startup taint, so the
        # autoscaler does not treat them as unable to take the pending pods and scale up again.
        f"--startup-taint={TAINT_PREFLIGHT}",
        # A node the health agent found faulty keeps counting as a registered, ready node (it is not coming up),
        # and its taint is left out of the group's template, so one bad node does not make the autoscaler believe
        # the whole group cannot take the pending pods.
        f"--status-taint={TAINT_UNHEALTHY}",
        # The Lease its leader election takes (the flag's default, named so the Role below can name it).
        f"--leader-elect-resource-name={LEASE}",
        "--expander=least-waste",
        "--scale-down-utilization-threshold=0.5",
        "--scale-down-gpu-utilization-threshold=0.5",
        "--scale-down-unneeded-time=15m",
        "--scale-down-delay-after-add=15m",
        # Bounded deletes: never more than the configured share of the cluster at once.
        f"--max-scale-down-parallelism={parallel}",
        f"--max-drain-parallelism={parallel}",
        f"--max-total-unready-percentage={MAX_UNREADY_PERCENT}",
        f"--ok-total-unready-count={OK_TOTAL_UNREADY_COUNT}",
        "--max-node-provision-time=25m",
        # Every registered node counts, the API servers' kubelets included.
        f"--max-nodes-total={nodes + control_plane_nodes}",
        # Kueue asks for a gang's nodes with ProvisioningRequests (objects/kueue.py): the only way a topology-aware
        # pool at zero is scaled up (cluster-autoscaler FAQ.md "How can I use ProvisioningRequest").
        "--enable-provisioning-requests=true",
        "--skip-nodes-with-local-storage=false",
        "--skip-nodes-with-system-pods=true",
        "--leader-elect=true",
        "--scan-interval=30s",
        "--v=2",
    ]


def _rules() -> list[dict[str, Any]]:
    watch = ["watch", "list", "get"]
    return [
        {"apiGroups": [""], "resources": ["events", "endpoints"], "verbs": ["create", "patch"]},
        {"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]},
        {"apiGroups": [""], "resources": ["pods/status"], "verbs": ["update"]},
        {"apiGroups": [""], "resources": ["nodes"], "verbs": [*watch, "update"]},
        {"apiGroups": [""], "resources": ["namespaces", "pods", "services", "replicationcontrollers",
                                          "persistentvolumeclaims", "persistentvolumes"], "verbs": watch},
        {"apiGroups": ["apps"], "resources": ["daemonsets", "replicasets", "statefulsets"], "verbs": watch},
        {"apiGroups": ["batch"], "resources": ["jobs", "cronjobs"], "verbs": watch},
        {"apiGroups": ["policy"], "resources": ["poddisruptionbudgets"], "verbs": watch},
        {"apiGroups": ["storage.k8s.io"], "resources": ["storageclasses", "csinodes", "csidrivers",
                                                        "csistoragecapacities", "volumeattachments"], "verbs": watch},
        {"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims", "resourceslices", "deviceclasses"],
         "verbs": watch},
        # cluster-autoscaler 1.36.1 FAQ.md, "Enabling ProvisioningRequest Support", RBAC permissions.
        {"apiGroups": ["autoscaling.x-k8s.io"], "resources": ["provisioningrequests", "provisioningrequests/status"],
         "verbs": ["watch", "list", "get", "create", "update", "patch", "delete"]},
        {"apiGroups": [""], "resources": ["podtemplates"], "verbs": watch},
    ]


def autoscaler_objects(cluster: str, nodes: int, share: float, azure: dict[str, Any], minor: str,
                       control_plane_nodes: int = 0) -> list[Object]:
    """`azure`: subscription_id, tenant_id, resource_group, client_id (may be Pulumi outputs); `minor`: the
    cluster's Kubernetes minor, which picks the autoscaler release."""
    labels = {LABEL_APP: APP}
    env = [
        {"name": "ARM_CLOUD", "value": "AzurePublicCloud"},
        {"name": "ARM_SUBSCRIPTION_ID", "value": azure["subscription_id"]},
        {"name": "ARM_TENANT_ID", "value": azure["tenant_id"]},
        {"name": "ARM_RESOURCE_GROUP", "value": azure["resource_group"]},
        {"name": "ARM_VM_TYPE", "value": "vmss"},
        {"name": "ARM_USE_MANAGED_IDENTITY_EXTENSION", "value": "true"},
        {"name": "ARM_USER_ASSIGNED_IDENTITY_ID", "value": azure["client_id"]},
    ]
    pod = {
        "serviceAccountName": APP,
        **on_system_nodes(APP),
        "containers": [{
            "name": APP, "image": cluster_autoscaler_image(minor), "command": ["./cluster-autoscaler"],
            "args": autoscaler_args(cluster, nodes, share, control_plane_nodes), "env": env,
            "resources": {"requests": {"cpu": "1", "memory": "2Gi"}, "limits": {"memory": "8Gi"}},
            "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                                "capabilities": {"drop": ["ALL"]}},
        }],
    }
    return [
        obj("v1", "ServiceAccount", APP, NAMESPACE),
        obj("rbac.authorization.k8s.io/v1", "ClusterRole", APP, rules=_rules()),
        obj("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", APP,
            roleRef={"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": APP},
            subjects=[{"kind": "ServiceAccount", "name": APP, "namespace": NAMESPACE}]),
        obj("rbac.authorization.k8s.io/v1", "Role", APP, NAMESPACE, rules=[
            {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create", "list", "watch"]},
            {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["cluster-autoscaler-status"],
             "verbs": ["get", "update", "patch", "delete"]},
            # Its own Lease only (RBAC cannot limit `create` by name: kubernetes.io/docs/reference/access-authn-authz/rbac).
            {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
            {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "resourceNames": [LEASE],
             "verbs": ["get", "update"]}]),
        obj("rbac.authorization.k8s.io/v1", "RoleBinding", APP, NAMESPACE,
            roleRef={"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": APP},
            subjects=[{"kind": "ServiceAccount", "name": APP, "namespace": NAMESPACE}]),
        # One active replica (leader election); the second takes over if its zone is lost.
        obj("apps/v1", "Deployment", APP, NAMESPACE, labels=labels, spec={
            "replicas": 2, "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": pod}}),
    ]
