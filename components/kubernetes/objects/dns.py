"""CoreDNS, managed here instead of by kubeadm so it runs on system nodes spread over zones."""

from __future__ import annotations

import math

from gpucluster.catalog.in_cluster import coredns_image
from gpucluster.kubernetes.objects.common import Object, obj, on_system_nodes, pod_disruption_budget
from gpucluster.vocabulary import LABEL_APP, LABEL_HOSTNAME

NAMESPACE = "kube-system"
APP = "coredns"
NODES_PER_REPLICA = 256

COREFILE = """.:53 {
    errors
    health {
        lameduck 5s
    }
    ready
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
        ttl 30
    }
    prometheus :9153
    forward . /etc/resolv.conf {
        max_concurrent 1000
    }
    cache 30 {
        serve_stale 1h verify
    }
    loop
    reload
    loadbalance
}
"""


def coredns_replicas(nodes: int, system_nodes: int) -> int:
    """One replica per 256 nodes, at least 3, and no more than system nodes (one replica per node)."""
    return max(1, min(max(3, math.ceil(nodes / NODES_PER_REPLICA)), system_nodes))


def coredns_objects(nodes: int, system_nodes: int, dns_service_ip: str, minor: str) -> list[Object]:
    labels = {LABEL_APP: APP, "k8s-app": "kube-dns"}
    placement = on_system_nodes(APP)
    selector = {"matchLabels": {LABEL_APP: APP}}
    pod = {
        "serviceAccountName": APP,
        # `forward . /etc/resolv.conf` must reach the node's resolver: under the default ClusterFirst the kubelet
        # points that file at the kube-dns Service, CoreDNS forwards to itself and `loop` halts it (coredns
        # plugin/loop/README.md). kubeadm's own CoreDNS Deployment sets Default for this reason (kubernetes
        # cmd/kubeadm/app/phases/addons/dns/manifests.go); the cluster skips kubeadm's coredns phase.
        "dnsPolicy": "Default",
        **placement,
        "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": selector, "topologyKey": LABEL_HOSTNAME}]}},
        "containers": [{
            "name": APP, "image": coredns_image(minor), "args": ["-conf", "/etc/coredns/Corefile"],
            "resources": {"requests": {"cpu": "200m", "memory": "256Mi"}, "limits": {"memory": "512Mi"}},
            "ports": [{"name": "dns", "containerPort": 53, "protocol": "UDP"},
                      {"name": "dns-tcp", "containerPort": 53, "protocol": "TCP"},
                      {"name": "metrics", "containerPort": 9153, "protocol": "TCP"}],
            "volumeMounts": [{"name": "config", "mountPath": "/etc/coredns", "readOnly": True}],
            "livenessProbe": {"httpGet": {"path": "/health", "port": 8080}, "initialDelaySeconds": 60},
            "readinessProbe": {"httpGet": {"path": "/ready", "port": 8181}},
            "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                                "capabilities": {"add": ["NET_BIND_SERVICE"], "drop": ["ALL"]}},
        }],
        "volumes": [{"name": "config", "configMap": {"name": APP}}],
    }
    return [
        obj("v1", "ServiceAccount", APP, NAMESPACE),
        # What CoreDNS v1.12.1-v1.14.2 (every pinned minor's) watches (plugin/kubernetes/controller.go): services,
        # endpointslices, namespaces, and pods only with `pods verified` (this Corefile: `pods insecure`). No Endpoints.
        obj("rbac.authorization.k8s.io/v1", "ClusterRole", "system:coredns", rules=[
            {"apiGroups": [""], "resources": ["services", "namespaces"], "verbs": ["list", "watch"]},
            {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": ["list", "watch"]}]),
        obj("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "system:coredns",
            roleRef={"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:coredns"},
            subjects=[{"kind": "ServiceAccount", "name": APP, "namespace": NAMESPACE}]),
        obj("v1", "ConfigMap", APP, NAMESPACE, data={"Corefile": COREFILE}),
        obj("apps/v1", "Deployment", APP, NAMESPACE, labels=labels, spec={
            "replicas": coredns_replicas(nodes, system_nodes), "selector": selector,
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}},
            "template": {"metadata": {"labels": labels}, "spec": pod}}),
        obj("v1", "Service", "kube-dns", NAMESPACE, labels=labels, spec={
            "clusterIP": dns_service_ip, "selector": {LABEL_APP: APP},
            "ports": [{"name": "dns", "port": 53, "protocol": "UDP"}, {"name": "dns-tcp", "port": 53, "protocol": "TCP"},
                      {"name": "metrics", "port": 9153, "protocol": "TCP"}]}),
        pod_disruption_budget(APP, NAMESPACE, APP),
    ]
