"""cloud-init for an API-server VM: kubeadm with external etcd, pre-made certificates, and the scale flags.

Every instance of the scale set is identical and stateless: it writes the PKI, then runs the kubeadm
init phases that are idempotent (control-plane static pods, kubeconfigs, uploaded config, the
bootstrap token), skipping the ones that would create state (certs, local etcd).
"""

from __future__ import annotations

from dataclasses import dataclass

import yaml

from components.kubernetes.objects.gang import SCHEDULER_CONFIG_PATH, scheduler_configuration
from components.planning.control_plane import ApiServerFlags

AUDIT_POLICY = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived"],
    "rules": [
        # High-volume, low-value reads first: they dominate at 7,500 nodes.
        {"level": "None", "verbs": ["get", "list", "watch"]},
        {"level": "None", "resources": [{"group": "", "resources": ["events"]}]},
        {"level": "None", "users": ["system:kube-proxy"]},
        {"level": "Metadata", "resources": [{"group": "", "resources": ["secrets", "configmaps"]}]},
        {"level": "Metadata"},
    ],
}


@dataclass(frozen=True)
class ApiServerBootstrap:
    cluster: str
    kubernetes_version: str
    endpoint: str
    service_cidr: str
    etcd_endpoints: tuple[str, ...]
    events_etcd_endpoints: tuple[str, ...]
    bootstrap_token: str
    flags: ApiServerFlags
    pki_files: dict[str, str]
    """Path under /etc/kubernetes/pki -> PEM text."""


def _args(pairs: dict[str, str]) -> list[dict[str, str]]:
    return [{"name": k, "value": v} for k, v in pairs.items()]


def kubeadm_config(b: ApiServerBootstrap) -> list[dict[str, object]]:
    api_args = {
        "max-requests-inflight": str(b.flags.max_requests_inflight),
        "max-mutating-requests-inflight": str(b.flags.max_mutating_requests_inflight),
        "goaway-chance": str(b.flags.goaway_chance),
        "audit-policy-file": "/etc/kubernetes/audit-policy.yaml",
        "audit-log-path": "/var/log/kubernetes/audit.log",
        "audit-log-maxage": "7",
        "audit-log-maxbackup": "10",
        "audit-log-maxsize": "512",
        "profiling": "false",
        # Watch caches are sized dynamically since 1.19; API Priority and Fairness is on by default.
    }
    if b.events_etcd_endpoints:
        api_args["etcd-servers-overrides"] = "/events#" + ";".join(b.events_etcd_endpoints)
    init = {
        "apiVersion": "kubeadm.k8s.io/v1beta4",
        "kind": "InitConfiguration",
        "bootstrapTokens": [{"token": b.bootstrap_token, "ttl": "0s", "usages": ["signing", "authentication"],
                             "groups": ["system:bootstrappers:kubeadm:default-node-token"]}],
        "nodeRegistration": {"taints": [{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}]},
    }
    cluster = {
        "apiVersion": "kubeadm.k8s.io/v1beta4",
        "kind": "ClusterConfiguration",
        "clusterName": b.cluster,
        "kubernetesVersion": f"v{b.kubernetes_version}",
        "controlPlaneEndpoint": b.endpoint,
        "networking": {"serviceSubnet": b.service_cidr, "dnsDomain": "cluster.local"},
        "etcd": {"external": {"endpoints": list(b.etcd_endpoints), "caFile": "/etc/kubernetes/pki/etcd/ca.crt",
                              "certFile": "/etc/kubernetes/pki/apiserver-etcd-client.crt",
                              "keyFile": "/etc/kubernetes/pki/apiserver-etcd-client.key"}},
        "apiServer": {
            "extraArgs": _args(api_args),
            "extraVolumes": [
                {"name": "audit-policy", "hostPath": "/etc/kubernetes/audit-policy.yaml",
                 "mountPath": "/etc/kubernetes/audit-policy.yaml", "readOnly": True, "pathType": "File"},
                {"name": "audit-log", "hostPath": "/var/log/kubernetes", "mountPath": "/var/log/kubernetes",
                 "pathType": "DirectoryOrCreate"},
            ],
        },
        # Pod IPs come from the NICs, not from per-node CIDRs.
        "controllerManager": {"extraArgs": _args({"allocate-node-cidrs": "false", "kube-api-qps": "300",
                                                  "kube-api-burst": "400"})},
        # The scheduler reads its profile (MostAllocated) and client limits from the file.
        "scheduler": {
            "extraArgs": _args({"config": SCHEDULER_CONFIG_PATH}),
            "extraVolumes": [{"name": "scheduler-config", "hostPath": SCHEDULER_CONFIG_PATH,
                              "mountPath": SCHEDULER_CONFIG_PATH, "readOnly": True, "pathType": "File"}],
        },
    }
    return [init, cluster]


def render_apiserver_cloud_init(b: ApiServerBootstrap, install_script: str) -> str:
    files = [{"path": f"/etc/kubernetes/pki/{path}", "permissions": "0600" if path.endswith(".key") else "0644",
              "content": pem} for path, pem in sorted(b.pki_files.items())]
    files += [
        {"path": "/etc/kubernetes/kubeadm.yaml", "permissions": "0600",
         "content": yaml.safe_dump_all(kubeadm_config(b), sort_keys=False)},
        {"path": "/etc/kubernetes/audit-policy.yaml", "permissions": "0644",
         "content": yaml.safe_dump(AUDIT_POLICY, sort_keys=False)},
        {"path": SCHEDULER_CONFIG_PATH, "permissions": "0644",
         "content": yaml.safe_dump(scheduler_configuration(), sort_keys=False)},
        {"path": "/usr/local/sbin/gpucluster-install-kubernetes", "permissions": "0755", "content": install_script},
    ]
    # kube-proxy: Cilium replaces it. CoreDNS: the in-cluster layer runs it, spread over zones.
    skip = "preflight,certs,etcd,addon/kube-proxy,addon/coredns,upload-certs"
    document = {
        "write_files": files,
        "runcmd": [
            ["/usr/local/sbin/gpucluster-install-kubernetes"],
            ["kubeadm", "init", "--config", "/etc/kubernetes/kubeadm.yaml", f"--skip-phases={skip}"],
        ],
    }
    return "#cloud-config\n" + yaml.safe_dump(document, sort_keys=False)
