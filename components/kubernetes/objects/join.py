"""What `kubeadm join` needs in the cluster, declared by the stack instead of kubeadm's bootstrap-token phase.

kubeadm's `bootstrap-token` init phase (kubernetes `cmd/kubeadm/app/cmd/phases/init/bootstraptoken.go`,
`runBootstrapToken`) writes the token Secret with `expiration = now + ttl` on every `kubeadm init`
(`UpdateOrCreateTokens` -> `BootstrapTokenToSecret`, `cmd/kubeadm/app/phases/bootstraptoken/node/token.go` and
`cmd/kubeadm/app/apis/bootstraptoken/v1/utils.go`), so each API-server boot or repair moved the expiry. The API
servers now skip that phase; the same phase also made the RBAC bindings and the `cluster-info` ConfigMap below,
so the stack declares those too, as kubeadm writes them (`phases/bootstraptoken/node/tlsbootstrap.go`,
`phases/bootstraptoken/clusterinfo/clusterinfo.go`).
"""

from __future__ import annotations

import base64
from typing import Any

import yaml

from gpucluster.kubernetes.objects.common import Object, obj
from gpucluster.planning.bootstrap_tokens import NODE_GROUP, TokenPeriod
from gpucluster.vocabulary import SECRET_TYPE_BOOTSTRAP_TOKEN

SECRET_TYPE = SECRET_TYPE_BOOTSTRAP_TOKEN
NODES_GROUP = "system:nodes"
RBAC = "rbac.authorization.k8s.io/v1"


def secret_name(token_id: str) -> str:
    """`bootstrap-token-<id>` in kube-system: the only name the bootstrap authenticator looks up."""
    return f"bootstrap-token-{token_id}"


def token_string_data(token_id: Any, token_secret: Any, period: TokenPeriod) -> dict[str, Any]:
    """The Secret's keys as the Kubernetes docs define them ("Authenticating with Bootstrap Tokens", Bootstrap
    Token Secret Format) and kubeadm writes them (`encodeTokenSecretData`): both usages, the node group."""
    return {
        "token-id": token_id,
        "token-secret": token_secret,
        "description": f"gpucluster node join token, rotation period {period.period} (slot {period.slot})",
        "expiration": period.expiration,
        "usage-bootstrap-authentication": "true",
        "usage-bootstrap-signing": "true",
        "auth-extra-groups": NODE_GROUP,
    }


def _binding(name: str, role: str, group: str) -> Object:
    return obj(RBAC, "ClusterRoleBinding", name,
               roleRef={"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
               subjects=[{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": group}])


def join_rbac() -> list[Object]:
    """kubeadm's bindings for joining nodes: get nodes (join's pre-checks), post CSRs, the controller-manager's
    auto-approval of the first client certificate and of its renewals (`AllowBoostrapTokensToGetNodes`,
    `AllowBootstrapTokensToPostCSRs`, `AutoApproveNodeBootstrapTokens`, `AutoApproveNodeCertificateRotation`)."""
    return [
        obj(RBAC, "ClusterRole", "kubeadm:get-nodes",
            rules=[{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]}]),
        _binding("kubeadm:get-nodes", "kubeadm:get-nodes", NODE_GROUP),
        _binding("kubeadm:kubelet-bootstrap", "system:node-bootstrapper", NODE_GROUP),
        _binding("kubeadm:node-autoapprove-bootstrap",
                 "system:certificates.k8s.io:certificatesigningrequests:nodeclient", NODE_GROUP),
        _binding("kubeadm:node-autoapprove-certificate-rotation",
                 "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient", NODES_GROUP),
        # Anonymous discovery reads only cluster-info; the controller-manager's bootstrap signer signs it per token.
        obj(RBAC, "Role", "kubeadm:bootstrap-signer-clusterinfo", "kube-public",
            rules=[{"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["cluster-info"],
                    "verbs": ["get"]}]),
        obj(RBAC, "RoleBinding", "kubeadm:bootstrap-signer-clusterinfo", "kube-public",
            roleRef={"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                     "name": "kubeadm:bootstrap-signer-clusterinfo"},
            subjects=[{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "system:anonymous"}]),
    ]


def cluster_info_kubeconfig(server: str, ca_pem: str) -> str:
    """The kubeconfig kubeadm puts in cluster-info: admin.conf's cluster (controlPlaneEndpoint and the CA) under
    the name "", nothing else. `kubeadm join` checks the CA against `caCertHashes` and the token's signature."""
    return yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "", "cluster": {
            "certificate-authority-data": base64.b64encode(ca_pem.encode()).decode(), "server": server}}],
        "contexts": None, "current-context": "", "preferences": {}, "users": None,
    }, sort_keys=False)


def cluster_info(kubeconfig: Any) -> Object:
    return obj("v1", "ConfigMap", "cluster-info", "kube-public", data={"kubeconfig": kubeconfig})
