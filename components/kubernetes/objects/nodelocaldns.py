"""NodeLocal DNSCache on every node: the upstream add-on's shape (kubernetes/kubernetes
cluster/addons/dns/nodelocaldns/nodelocaldns.yaml), configured as the Kubernetes docs say for a kubelet pointed at
the cache (tasks/administer-cluster/nodelocaldns.md, the IPVS variant: `-localip` is the link-local address only,
the kube-dns ClusterIP is the upstream). Cilium replaces kube-proxy here, so the cache cannot take over the
kube-dns ClusterIP as in the iptables variant; the kubelets' clusterDNS points at the link-local address
(components/bootstrap/from_plan.py).

The cache keeps answering from what it holds when CoreDNS or the API servers fail (`serve_stale`, coredns
plugin/cache/README.md), which is also what hides such a failure: every answer it serves stale counts in
`coredns_cache_served_stale_total`, and docs/control-plane.md alerts on it and on the forward errors.
"""

from __future__ import annotations

from gpucluster.catalog.in_cluster import NODE_CACHE_IMAGE
from gpucluster.kubernetes.objects.common import Object, obj
from gpucluster.planning.ip_plan import NODE_LOCAL_DNS_IP
from gpucluster.vocabulary import ANNOTATION_API_CALLS, ANNOTATION_PROMETHEUS_PORT, ANNOTATION_PROMETHEUS_SCRAPE, LABEL_APP

NAMESPACE = "kube-system"
APP = "node-local-dns"
METRICS_PORT = 9253
HEALTH_PORT = 8080
STALE_FOR = "1h"
"""How long an answer may be served past its TTL when the source fails (the plugin's default)."""


def _block(zone: str, forward: str, cache: str, options: list[str], extra: list[str]) -> str:
    return "\n".join([f"{zone}:53 {{", "    errors", f"    {cache} {{", *(f"        {c}" for c in options), "    }",
                      "    reload", "    loop", f"    bind {NODE_LOCAL_DNS_IP}", forward, f"    prometheus :{METRICS_PORT}",
                      *extra, "}", ""])


def corefile(cluster_dns: str) -> str:
    """The upstream Corefile with its install-time values set (cluster.local, the local address, kube-dns as the
    upstream); `__PILLAR__UPSTREAM__SERVERS__` stays for node-cache to fill from the node's resolv.conf. Every
    cache serves stale answers, verified against the source first (`serve_stale ... verify`)."""
    to_cluster = f"    forward . {cluster_dns} {{\n        force_tcp\n    }}"
    stale = f"serve_stale {STALE_FOR} verify"
    return "".join([
        _block("cluster.local", to_cluster, "cache", ["success 9984 30", "denial 9984 5", stale],
               [f"    health {NODE_LOCAL_DNS_IP}:{HEALTH_PORT}"]),
        _block("in-addr.arpa", to_cluster, "cache 30", [stale], []),
        _block("ip6.arpa", to_cluster, "cache 30", [stale], []),
        _block(".", "    forward . __PILLAR__UPSTREAM__SERVERS__", "cache 30", [stale], []),
    ])


def node_local_dns_objects(cluster_dns: str) -> list[Object]:
    labels = {LABEL_APP: APP, "k8s-app": APP}
    selector = {"matchLabels": {"k8s-app": APP}}
    pod = {
        "priorityClassName": "system-node-critical",
        "serviceAccountName": APP,
        "hostNetwork": True,
        "dnsPolicy": "Default",  # the cache itself never resolves through cluster DNS
        # On every node, whatever its taints (upstream: CriticalAddonsOnly, every NoExecute and NoSchedule).
        "tolerations": [{"key": "CriticalAddonsOnly", "operator": "Exists"}, {"effect": "NoExecute", "operator": "Exists"},
                        {"effect": "NoSchedule", "operator": "Exists"}],
        "containers": [{
            "name": "node-cache", "image": NODE_CACHE_IMAGE,
            "resources": {"requests": {"cpu": "25m", "memory": "5Mi"}},
            "args": ["-localip", NODE_LOCAL_DNS_IP, "-conf", "/etc/Corefile", "-upstreamsvc", "kube-dns-upstream",
                     "-pidfile", "/tmp/node-cache.pid"],
            "securityContext": {"capabilities": {"add": ["NET_ADMIN"]}},
            "ports": [{"containerPort": 53, "name": "dns", "protocol": "UDP"},
                      {"containerPort": 53, "name": "dns-tcp", "protocol": "TCP"},
                      {"containerPort": METRICS_PORT, "name": "metrics", "protocol": "TCP"}],
            "livenessProbe": {"httpGet": {"host": NODE_LOCAL_DNS_IP, "path": "/health", "port": HEALTH_PORT},
                              "initialDelaySeconds": 60, "timeoutSeconds": 5},
            "volumeMounts": [{"mountPath": "/run/xtables.lock", "name": "xtables-lock", "readOnly": False},
                             {"name": "config-volume", "mountPath": "/etc/coredns"},
                             {"name": "kube-dns-config", "mountPath": "/etc/kube-dns"}],
        }],
        "volumes": [{"name": "xtables-lock", "hostPath": {"path": "/run/xtables.lock", "type": "FileOrCreate"}},
                    {"name": "kube-dns-config", "configMap": {"name": "kube-dns", "optional": True}},
                    {"name": "config-volume", "configMap": {"name": APP, "items": [
                        {"key": "Corefile", "path": "Corefile.base"}]}}],
    }
    daemonset = obj("apps/v1", "DaemonSet", APP, NAMESPACE, labels=labels, spec={
        "updateStrategy": {"rollingUpdate": {"maxUnavailable": "10%"}},
        "selector": selector,
        "template": {"metadata": {"labels": labels, "annotations": {
            ANNOTATION_PROMETHEUS_PORT: str(METRICS_PORT), ANNOTATION_PROMETHEUS_SCRAPE: "true"}}, "spec": pod}})
    # node-cache reads kube-dns-upstream's address from its environment: it calls no API.
    daemonset["metadata"]["annotations"] = {ANNOTATION_API_CALLS: "0"}
    return [
        obj("v1", "ServiceAccount", APP, NAMESPACE),
        obj("v1", "Service", "kube-dns-upstream", NAMESPACE, labels={"k8s-app": "kube-dns"}, spec={
            "ports": [{"name": "dns", "port": 53, "protocol": "UDP", "targetPort": 53},
                      {"name": "dns-tcp", "port": 53, "protocol": "TCP", "targetPort": 53}],
            "selector": {"k8s-app": "kube-dns"}}),
        obj("v1", "ConfigMap", APP, NAMESPACE, data={"Corefile": corefile(cluster_dns)}),
        daemonset,
        # Headless: one metrics target per node for a scraper.
        obj("v1", "Service", APP, NAMESPACE, labels={"k8s-app": APP}, spec={
            "clusterIP": "None", "ports": [{"name": "metrics", "port": METRICS_PORT, "targetPort": METRICS_PORT}],
            "selector": {"k8s-app": APP}}),
    ]
