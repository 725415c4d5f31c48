"""Kubelet serving certificates signed by the cluster CA: the approver for their CSRs.

With `serverTLSBootstrap: true` a kubelet asks for its serving certificate with a CertificateSigningRequest for
the signer `kubernetes.io/kubelet-serving`, which kube-controller-manager signs with the cluster CA once it is
approved but never approves by itself (Kubernetes docs, "Certificate Signing Requests", Kubernetes signers:
kubelet-serving "Never auto-approved by kube-controller-manager"; "TLS bootstrapping", Certificate rotation).
postfinance/kubelet-csr-approver approves only a request that passes its checks
(`internal/controller/regex_ip_checks.go` at v1.2.14): the requester is `system:node:<name>`, each DNS name
starts with that node name and matches the provider regex (here: a computer name of one of the cluster's
scale sets), and every IP address lies in the provider prefixes (here: the node and control-plane subnets of
the plan). Its DNS-resolution check is off: it resolves the node name from a pod, through the cluster's DNS to
Azure's, which the plan cannot vouch for; a name that does not resolve is denied, and a denied CSR is final.
"""

from __future__ import annotations

import re

from gpucluster.catalog.in_cluster import CSR_APPROVER_IMAGE
from gpucluster.kubernetes.objects.common import Object, obj, on_system_nodes
from gpucluster.planning.cluster_plan import ClusterPlan
from gpucluster.planning.ip_plan import CONTROL_PLANE_BLOCK, pool_block_name
from gpucluster.vocabulary import LABEL_APP, SIGNER_KUBELET_SERVING

NAMESPACE = "kube-system"
APP = "kubelet-csr-approver"
RBAC = "rbac.authorization.k8s.io/v1"


def provider_regex(computer_name_prefixes: list[str]) -> str:
    """A node name is its VM's computer name: the scale set's computerNamePrefix followed by Azure's instance
    suffix (lowercase letters and digits)."""
    names = sorted(set(computer_name_prefixes))
    assert all(re.fullmatch(r"[a-z0-9-]+", n) for n in names), names  # scale-set names: nothing to escape
    return f"^({'|'.join(names)})[0-9a-z]+$"


def _rules() -> list[dict[str, object]]:
    """The ClusterRole of the release's `deploy/k8s/clusterrole.yaml` (v1.2.14)."""
    return [
        {"apiGroups": ["certificates.k8s.io"], "resources": ["certificatesigningrequests"],
         "verbs": ["get", "list", "watch"]},
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create", "get", "update"]},
        {"apiGroups": ["certificates.k8s.io"], "resources": ["certificatesigningrequests/approval"],
         "verbs": ["update"]},
        {"apiGroups": ["certificates.k8s.io"], "resources": ["signers"],
         "resourceNames": [SIGNER_KUBELET_SERVING], "verbs": ["approve"]},
        {"apiGroups": [""], "resources": ["events"], "verbs": ["create"]},
    ]


def csr_approver_objects(computer_name_prefixes: list[str], node_prefixes: list[str]) -> list[Object]:
    labels = {LABEL_APP: APP}
    env = [
        {"name": "PROVIDER_REGEX", "value": provider_regex(computer_name_prefixes)},
        {"name": "PROVIDER_IP_PREFIXES", "value": ",".join(node_prefixes)},
        {"name": "BYPASS_DNS_RESOLUTION", "value": "true"},
        # One DNS name: the kubelet asks for its hostname only (no cloud provider adds others).
        {"name": "ALLOWED_DNS_NAMES", "value": "1"},
    ]
    pod = {
        "serviceAccountName": APP,
        **on_system_nodes(APP),
        "containers": [{
            "name": APP, "image": CSR_APPROVER_IMAGE,
            "args": ["-metrics-bind-address", ":8080", "-health-probe-bind-address", ":8081", "-leader-election"],
            "env": env,
            "livenessProbe": {"httpGet": {"path": "/healthz", "port": 8081}},
            "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"memory": "128Mi"}},
            # ko's default base image (the release is built with ko, `.ko.yaml`) runs as 65532.
            "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                                "runAsNonRoot": True, "runAsUser": 65532, "capabilities": {"drop": ["ALL"]}},
        }],
    }
    return [
        obj("v1", "ServiceAccount", APP, NAMESPACE),
        obj(RBAC, "ClusterRole", APP, rules=_rules()),
        obj(RBAC, "ClusterRoleBinding", APP,
            roleRef={"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": APP},
            subjects=[{"kind": "ServiceAccount", "name": APP, "namespace": NAMESPACE}]),
        # Two replicas, one leader: the other takes over if its zone is lost.
        obj("apps/v1", "Deployment", APP, NAMESPACE, labels=labels, spec={
            "replicas": 2, "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": pod}}),
    ]


API_SERVER_COMPUTER_NAME_PREFIX = "apiserver"
"""components/azure/api_servers.py names the API servers' computers `apiserver<suffix>`."""


def csr_approver_from_plan(plan: ClusterPlan) -> list[Object]:
    """Node names from the scale sets' computer name prefixes (their names, components/azure/scale_set/body.py), and
    the subnets machines take their addresses from: every pool's block and the control plane's."""
    prefixes = [API_SERVER_COMPUTER_NAME_PREFIX, *(s.name for p in plan.pools for s in p.scale_sets)]
    blocks = [CONTROL_PLANE_BLOCK, *(pool_block_name(p.name) for p in plan.pools)]
    return csr_approver_objects(prefixes, [str(plan.ip.block(b).cidr) for b in blocks])
