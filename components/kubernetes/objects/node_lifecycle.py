"""cloud-provider-azure's cloud-controller-manager running only its cloud-node-lifecycle controller: it deletes the
Node object of a VM that no longer exists (the autoscaler's scale-downs, a VM deleted by hand or by Azure) and taints
the Node of a stopped VM.

Read at kubernetes-sigs/cloud-provider-azure v1.36.5 (the cluster's minor; vendored k8s.io/cloud-provider v0.36.3):
- k8s.io/cloud-provider controllers/nodelifecycle MonitorNodes: for every Node whose Ready condition is not True it
  asks the provider whether the instance exists (deletes the Node if not) or is shut down (taints it
  `node.cloudprovider.kubernetes.io/shutdown:NoSchedule`); on Ready nodes it removes that taint.
- pkg/provider/azure_instances_v2.go InstanceExists/InstanceShutdown: from `spec.providerID`, the scale set's VM
  and its power state; `nodeInstanceNotFoundGracePeriodInSeconds` keeps a just-registered node whose VM ARM does not
  show yet.
- cmd/cloud-controller-manager/app: `--controllers` takes the alias `cloud-node-lifecycle`; the controller's client
  is the manager's own account unless --use-service-account-credentials (names/controller_names.go, core.go).
- pkg/provider/config/azure.go and pkg/azclient: the cloud config keys below; `disableAvailabilitySetNodes` with
  vmType vmss (every node here is a scale-set VM), so no standalone-VM list is needed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gpucluster.catalog.in_cluster import cloud_controller_manager_image
from gpucluster.kubernetes.objects.common import Object, obj, on_system_nodes, pod_disruption_budget
from gpucluster.vocabulary import LABEL_APP

NAMESPACE = "kube-system"
APP = "cloud-node-lifecycle"
CONFIG_PATH = "/etc/kubernetes/cloud-config/azure.json"
SECURE_PORT = 10258
NEW_NODE_GRACE_SECONDS = 900
"""A node joins before ARM lists its VM; scale-set VMs here boot, join and run GPU checks within this."""
RBAC = "rbac.authorization.k8s.io/v1"


def cloud_config(azure: dict[str, Any], location: str) -> dict[str, Any]:
    """azure.json: where the scale sets are and which identity reads them; nothing for load balancers or routes,
    which this manager does not run."""
    return {
        "cloud": "AzurePublicCloud", "tenantId": azure["tenant_id"], "subscriptionId": azure["subscription_id"],
        "resourceGroup": azure["resource_group"], "location": location, "vmType": "vmss",
        "disableAvailabilitySetNodes": True, "useInstanceMetadata": True,
        "useManagedIdentityExtension": True, "userAssignedIdentityID": azure["client_id"],
        "nodeInstanceNotFoundGracePeriodInSeconds": NEW_NODE_GRACE_SECONDS,
        "cloudProviderBackoff": True, "cloudProviderRateLimit": True,
    }


def args() -> list[str]:
    return ["--cloud-provider=azure", f"--cloud-config={CONFIG_PATH}", "--controllers=cloud-node-lifecycle",
            "--leader-elect=true", "--allocate-node-cidrs=false", "--configure-cloud-routes=false",
            f"--secure-port={SECURE_PORT}", "--v=2"]


def node_lifecycle_objects(azure: dict[str, Any], location: str, minor: str,
                           render_json: Callable[[dict[str, Any]], Any]) -> list[Object]:
    """`azure`: the identity's settings (may hold Pulumi outputs); `render_json` turns the cloud config into the
    ConfigMap's text (json.dumps, or Pulumi's Output.json_dumps when values are outputs)."""
    labels = {LABEL_APP: APP}
    container = {
        "name": "cloud-controller-manager", "image": cloud_controller_manager_image(minor),
        "command": ["cloud-controller-manager"], "args": args(),
        "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"memory": "1Gi"}},
        "livenessProbe": {"httpGet": {"path": "/healthz", "port": SECURE_PORT, "scheme": "HTTPS"},
                          "initialDelaySeconds": 20, "periodSeconds": 10, "timeoutSeconds": 5},
        "volumeMounts": [{"name": "cloud-config", "mountPath": "/etc/kubernetes/cloud-config", "readOnly": True}],
        "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True, "runAsNonRoot": True,
                            "runAsUser": 65532, "capabilities": {"drop": ["ALL"]}},
    }
    pod = {"serviceAccountName": APP, **on_system_nodes(APP), "containers": [container],
           "volumes": [{"name": "cloud-config", "configMap": {"name": APP}}]}
    account = [{"kind": "ServiceAccount", "name": APP, "namespace": NAMESPACE}]
    return [
        obj("v1", "ServiceAccount", APP, NAMESPACE),
        # No credential in it (the VM's managed identity signs in), so a ConfigMap, readable in a review.
        obj("v1", "ConfigMap", APP, NAMESPACE, data={"azure.json": render_json(cloud_config(azure, location))}),
        # Nodes: watch, delete those whose VM is gone, taint and untaint the shut down; events about it.
        obj(RBAC, "ClusterRole", f"gpucluster:{APP}", rules=[
            {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch", "update", "patch", "delete"]},
            {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch", "update"]},
            {"apiGroups": ["events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch", "update"]}]),
        obj(RBAC, "ClusterRoleBinding", f"gpucluster:{APP}",
            roleRef={"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": f"gpucluster:{APP}"},
            subjects=account),
        # Its secure port authenticates and authorises callers through the API server, as every controller
        # manager does (the built-in system:auth-delegator role and extension-apiserver-authentication-reader).
        obj(RBAC, "ClusterRoleBinding", f"gpucluster:{APP}:auth-delegator",
            roleRef={"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:auth-delegator"},
            subjects=account),
        obj(RBAC, "RoleBinding", f"{APP}-authentication-reader", NAMESPACE,
            roleRef={"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                     "name": "extension-apiserver-authentication-reader"}, subjects=account),
        # Leader election: the Lease `cloud-controller-manager` in kube-system.
        obj(RBAC, "Role", APP, NAMESPACE, rules=[
            {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
            {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
             "resourceNames": ["cloud-controller-manager"], "verbs": ["get", "update"]}]),
        obj(RBAC, "RoleBinding", APP, NAMESPACE,
            roleRef={"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": APP}, subjects=account),
        obj("apps/v1", "Deployment", APP, NAMESPACE, labels=labels, spec={
            "replicas": 2, "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": pod}}),
        pod_disruption_budget(APP, NAMESPACE, APP),
    ]
