"""The telemetry pipeline in the cluster (docs/metrics.md): node_exporter on every node, kube-state-metrics for the
node series, and the edge Prometheus shards that scrape them, dcgm-exporter (a GPU operator operand), the API
servers and etcd, evaluate the edge recording rules and remote-write only their output to the Azure Monitor
workspace, signing in with the metrics identity.

Consumers, read at the pinned tags: Prometheus v3.14.0 (config/config.go, discovery/kubernetes/kubernetes.go,
model/relabel/relabel.go, storage/remote/azuread/azuread.go), node_exporter v1.12.1 (node_exporter.go,
collector/collector.go, collector/paths.go), kube-state-metrics v2.20.0 (pkg/options/options.go); the keys and flags
rendered here are checked against what tools/extract_metrics_consumers.py read there (tests/test_metrics_objects.py).
"""

from __future__ import annotations

import hashlib
import math
from typing import Any

from gpucluster.bootstrap.cloud_config import safe_yaml
from gpucluster.catalog.in_cluster import GPU_OPERATOR_NAMESPACE
from gpucluster.catalog.metrics import (
    EDGE_REPLICAS,
    HEAD_BYTES_PER_SERIES,
    KSM_NODE_METRICS,
    KSM_REPLICAS,
    KUBE_STATE_METRICS_IMAGE,
    NODE_EXPORTER_COLLECTORS,
    NODE_EXPORTER_IMAGE,
    PROMETHEUS_IMAGE,
    TRAINING_COUNTERS,
)
from gpucluster.kubernetes.objects.common import Object, obj, on_system_nodes
from gpucluster.planning.metrics import MetricsPlan
from gpucluster.planning.metrics_rules import KEPT_RAW, RECORDING_RULES, WRITTEN
from gpucluster.vocabulary import ANNOTATION_CONFIG_DIGEST, LABEL_APP, LABEL_IB_DOMAIN, LABEL_ZONE

NAMESPACE = "gpucluster-metrics"
NODE_EXPORTER, KSM, PROMETHEUS = "node-exporter", "kube-state-metrics", "prometheus"
NODE_EXPORTER_PORT, KSM_PORT, PROMETHEUS_PORT, DCGM_EXPORTER_PORT = 9100, 8080, 9090, 9400
DCGM_EXPORTER_POD_LABEL = "app=nvidia-dcgm-exporter"
"""The label the GPU operator's dcgm-exporter pods carry (its own `app` key, not app.kubernetes.io/name), beside
containerPort 9400: components/catalog/facts/consumers/operands-gpu-operator.json, read from gpu-operator's
assets/state-dcgm-exporter/0800_daemonset.yaml by tools/gpu_operator_operands.py."""
RETENTION = "2h"
"""The shards keep two hours: everything that matters is remote-written, and a short head keeps WAL replay after a
restart to minutes."""
SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
RBAC = "rbac.authorization.k8s.io/v1"


def _meta_label(label: str) -> str:
    """Prometheus' Kubernetes discovery label for a node label (non-alphanumerics become `_`)."""
    return "__meta_kubernetes_node_label_" + "".join(c if c.isalnum() else "_" for c in label)


def _pods(namespace: str, selector: str, port: int, shard: int, shards: int) -> dict[str, Any]:
    """Pods matching a label selector, split between shards by node so that a node's series are whole in one shard,
    with the node, its InfiniBand domain and its zone as labels."""
    return {
        "kubernetes_sd_configs": [{"role": "pod", "namespaces": {"names": [namespace]},
                                   "selectors": [{"role": "pod", "label": selector}],
                                   "attach_metadata": {"node": True}}],
        "relabel_configs": [
            {"source_labels": ["__meta_kubernetes_pod_container_port_number"], "regex": str(port), "action": "keep"},
            {"source_labels": ["__meta_kubernetes_pod_node_name"], "modulus": shards, "target_label": "__tmp_shard",
             "action": "hashmod"},
            {"source_labels": ["__tmp_shard"], "regex": str(shard), "action": "keep"},
            {"source_labels": ["__meta_kubernetes_pod_node_name"], "target_label": "node", "action": "replace"},
            {"source_labels": [_meta_label(LABEL_IB_DOMAIN)], "target_label": "domain", "action": "replace"},
            {"source_labels": [_meta_label(LABEL_ZONE)], "target_label": "zone", "action": "replace"},
        ],
    }


def _keep(*names: str) -> list[dict[str, Any]]:
    return [{"source_labels": ["__name__"], "regex": "|".join(names), "action": "keep"}]


def prometheus_config(plan: MetricsPlan, shard: int, cluster: str, etcd: list[str], remote_write_url: Any,
                      client_id: Any) -> dict[str, Any]:
    """One shard's prometheus.yml. Shard 0 also scrapes what has one target for the cluster: kube-state-metrics,
    the API servers (through the `kubernetes` Service's endpoints) and etcd (`etcd`: member address:port)."""
    jobs: list[dict[str, Any]] = [
        {"job_name": "dcgm-exporter", **_pods(GPU_OPERATOR_NAMESPACE, DCGM_EXPORTER_POD_LABEL, DCGM_EXPORTER_PORT, shard,
                                              plan.shards),
         "metric_relabel_configs": _keep(*(c.field for c in TRAINING_COUNTERS))},
        {"job_name": NODE_EXPORTER, **_pods(NAMESPACE, f"{LABEL_APP}={NODE_EXPORTER}", NODE_EXPORTER_PORT, shard, plan.shards),
         "metric_relabel_configs": _keep("node_cpu_seconds_total", "node_infiniband_.+")},
    ]
    if shard == 0:
        jobs += [
            {"job_name": KSM, "kubernetes_sd_configs": [{"role": "pod", "namespaces": {"names": [NAMESPACE]},
                                                         "selectors": [{"role": "pod", "label": f"{LABEL_APP}={KSM}"}]}],
             "relabel_configs": [{"source_labels": ["__meta_kubernetes_pod_container_port_number"],
                                  "regex": str(KSM_PORT), "action": "keep"}],
             # Of the node conditions, Ready only (the taint series have no `condition` label).
             "metric_relabel_configs": [
                 {"source_labels": ["__name__", "condition"],
                  "regex": "kube_node_status_condition;Ready|kube_node_spec_taint;.*", "action": "keep"}]},
            {"job_name": "apiserver", "scheme": "https",
             "authorization": {"credentials_file": f"{SA_DIR}/token"}, "tls_config": {"ca_file": f"{SA_DIR}/ca.crt"},
             "kubernetes_sd_configs": [{"role": "endpointslice", "namespaces": {"names": ["default"]}}],
             "relabel_configs": [{"source_labels": ["__meta_kubernetes_service_name"], "regex": "kubernetes",
                                  "action": "keep"}],
             "metric_relabel_configs": _keep("apiserver_current_inflight_requests",
                                             "apiserver_flowcontrol_rejected_requests_total")},
            {"job_name": "etcd", "static_configs": [{"targets": etcd}],
             "metric_relabel_configs": _keep(*(name for name, per, _ in KEPT_RAW if per == "etcdMember"))},
        ]
    return {
        # Prometheus expands ${POD_NAME} in external labels from its environment (config/config.go Load).
        "global": {"scrape_interval": f"{plan.scrape_interval_seconds}s",
                   "evaluation_interval": f"{plan.rule_interval_seconds}s",
                   "external_labels": {"cluster": cluster, "shard": str(shard), "replica": "${POD_NAME}"}},
        "rule_files": ["/etc/prometheus/rules/*.yml"],
        "scrape_configs": jobs,
        "remote_write": [{"url": remote_write_url,
                          "azuread": {"cloud": "AzurePublic", "managed_identity": {"client_id": client_id}},
                          "write_relabel_configs": _keep(WRITTEN)}],
    }


def edge_rules() -> dict[str, Any]:
    """The edge recording rules in Prometheus' rule-file format, one group per concern."""
    groups: dict[str, list[dict[str, str]]] = {}
    for rule in RECORDING_RULES:
        groups.setdefault(rule.group, []).append({"record": rule.record, "expr": rule.expr})
    return {"groups": [{"name": name, "rules": rules} for name, rules in groups.items()]}


def node_exporter_objects() -> list[Object]:
    labels = {LABEL_APP: NODE_EXPORTER}
    args = ["--path.procfs=/host/proc", "--path.sysfs=/host/sys", "--collector.disable-defaults",
            *(f"--collector.{c}" for c in NODE_EXPORTER_COLLECTORS), f"--web.listen-address=:{NODE_EXPORTER_PORT}"]
    container = {
        "name": NODE_EXPORTER, "image": NODE_EXPORTER_IMAGE, "args": args,
        "ports": [{"name": "metrics", "containerPort": NODE_EXPORTER_PORT}],
        "resources": {"requests": {"cpu": "20m", "memory": "32Mi"}, "limits": {"memory": "128Mi"}},
        "volumeMounts": [{"name": "proc", "mountPath": "/host/proc", "readOnly": True},
                         {"name": "sys", "mountPath": "/host/sys", "readOnly": True}],
        "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True, "runAsNonRoot": True,
                            "runAsUser": 65534, "capabilities": {"drop": ["ALL"]}},
    }
    # Host network: a port on the node's address, no pod address taken from the NICs on any node.
    pod = {"hostNetwork": True, "priorityClassName": "system-node-critical", "automountServiceAccountToken": False,
           "tolerations": [{"operator": "Exists"}], "containers": [container],
           "volumes": [{"name": "proc", "hostPath": {"path": "/proc"}}, {"name": "sys", "hostPath": {"path": "/sys"}}]}
    return [obj("apps/v1", "DaemonSet", NODE_EXPORTER, NAMESPACE, labels=labels, spec={
        "selector": {"matchLabels": labels},
        "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "10%"}},
        "template": {"metadata": {"labels": labels}, "spec": pod}})]


def kube_state_metrics_objects() -> list[Object]:
    """Nodes only, and only the metrics the rules read: each replica holds ~5 series per node."""
    labels = {LABEL_APP: KSM}
    account = [{"kind": "ServiceAccount", "name": KSM, "namespace": NAMESPACE}]
    container = {
        "name": KSM, "image": KUBE_STATE_METRICS_IMAGE,
        "args": ["--resources=nodes", f"--metric-allowlist={','.join(KSM_NODE_METRICS)}", f"--port={KSM_PORT}"],
        "ports": [{"name": "metrics", "containerPort": KSM_PORT}],
        "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"memory": "1Gi"}},
        "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True, "runAsNonRoot": True,
                            "runAsUser": 65534, "capabilities": {"drop": ["ALL"]}},
    }
    return [
        obj("v1", "ServiceAccount", KSM, NAMESPACE),
        obj(RBAC, "ClusterRole", f"gpucluster:{KSM}", rules=[
            {"apiGroups": [""], "resources": ["nodes"], "verbs": ["list", "watch"]}]),
        obj(RBAC, "ClusterRoleBinding", f"gpucluster:{KSM}",
            roleRef={"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": f"gpucluster:{KSM}"},
            subjects=account),
        # Two replicas in two zones, both scraped: the rules take `max by (node)` of what they report.
        obj("apps/v1", "Deployment", KSM, NAMESPACE, labels=labels, spec={
            "replicas": KSM_REPLICAS, "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": {
                "serviceAccountName": KSM, **on_system_nodes(KSM), "containers": [container]}}}),
    ]


def shard_name(shard: int) -> str:
    return f"{PROMETHEUS}-{shard}"


def config_digest(config_text: Any, rules_text: str) -> Any:
    """16 hex of sha256 over a shard's prometheus.yml and the rule file: on the pod template, so a changed config,
    remote-write URL or rule rolls the shard's pods (Prometheus reads both at start, and v3.14.0 reloads only on
    SIGHUP, on /-/reload with --web.enable-lifecycle, or with --config.auto-reload: cmd/prometheus/main.go; none
    is set here). A rolled pod starts with an empty head block: its raw history was only at the edge anyway.
    `config_text` may be a Pulumi output (its remote-write URL is known at deploy): then the digest is one too."""
    def digest(text: str) -> str:
        return hashlib.sha256(f"{text}\0{rules_text}".encode()).hexdigest()[:16]

    return config_text.apply(digest) if hasattr(config_text, "apply") else digest(config_text)


def prometheus_objects(plan: MetricsPlan, cluster: str, etcd: list[str], remote_write_url: Any, client_id: Any,
                       render_yaml: Any = None) -> list[Object]:
    """One StatefulSet per shard, of `EDGE_REPLICAS` replicas spread over zones, with its own prometheus.yml. The
    account lists and watches what discovery reads (pods with their nodes; endpoint slices with their services) and
    reads the API servers' /metrics. `render_yaml` turns a config holding Pulumi outputs into text (default:
    yaml.safe_dump of plain values, emitted by libyaml: components/bootstrap/cloud_config.py)."""
    dump = render_yaml or safe_yaml
    rules_text = safe_yaml(edge_rules())
    account = [{"kind": "ServiceAccount", "name": PROMETHEUS, "namespace": NAMESPACE}]
    objects: list[Object] = [
        obj("v1", "ServiceAccount", PROMETHEUS, NAMESPACE),
        obj(RBAC, "ClusterRole", f"gpucluster:{PROMETHEUS}", rules=[
            {"apiGroups": [""], "resources": ["pods", "nodes"], "verbs": ["get", "list", "watch"]},
            {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": ["get", "list", "watch"]},
            {"apiGroups": [""], "resources": ["services"], "verbs": ["get", "list", "watch"]},
            {"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]),
        obj(RBAC, "ClusterRoleBinding", f"gpucluster:{PROMETHEUS}",
            roleRef={"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                     "name": f"gpucluster:{PROMETHEUS}"}, subjects=account),
        obj("v1", "ConfigMap", f"{PROMETHEUS}-rules", NAMESPACE, data={"edge.yml": rules_text}),
    ]
    # Memory for the raw series each shard holds (targets are split evenly by node hash), not the cap.
    per_shard = math.ceil(plan.raw_series / plan.shards)
    memory_gib = max(1, math.ceil(per_shard * HEAD_BYTES_PER_SERIES / 2**30))
    for shard in range(plan.shards):
        name = shard_name(shard)
        labels = {LABEL_APP: name}
        container = {
            "name": PROMETHEUS, "image": PROMETHEUS_IMAGE,
            "env": [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
            "args": ["--config.file=/etc/prometheus/config/prometheus.yml", "--storage.tsdb.path=/prometheus",
                     f"--storage.tsdb.retention.time={RETENTION}", f"--web.listen-address=:{PROMETHEUS_PORT}"],
            "ports": [{"name": "web", "containerPort": PROMETHEUS_PORT}],
            "resources": {"requests": {"cpu": "1", "memory": f"{memory_gib}Gi"},
                          "limits": {"memory": f"{memory_gib * 2}Gi"}},
            "volumeMounts": [{"name": "config", "mountPath": "/etc/prometheus/config", "readOnly": True},
                             {"name": "rules", "mountPath": "/etc/prometheus/rules", "readOnly": True},
                             {"name": "data", "mountPath": "/prometheus"}],
            "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                                "runAsNonRoot": True, "runAsUser": 65534, "capabilities": {"drop": ["ALL"]}},
        }
        spec = {"serviceAccountName": PROMETHEUS, **on_system_nodes(name), "containers": [container],
                "volumes": [{"name": "config", "configMap": {"name": name}},
                            {"name": "rules", "configMap": {"name": f"{PROMETHEUS}-rules"}},
                            {"name": "data", "emptyDir": {"sizeLimit": f"{memory_gib * 2}Gi"}}]}
        config_text = dump(prometheus_config(plan, shard, cluster, etcd, remote_write_url, client_id))
        # A StatefulSet: its pods keep their names (`<shard>-0`, `<shard>-1`) across restarts, so the `replica`
        # external label (${POD_NAME}) names the same series after a restart instead of a new set of them.
        objects += [
            obj("v1", "ConfigMap", name, NAMESPACE, data={"prometheus.yml": config_text}),
            obj("apps/v1", "StatefulSet", name, NAMESPACE, labels=labels, spec={
                "replicas": EDGE_REPLICAS, "selector": {"matchLabels": labels}, "podManagementPolicy": "Parallel",
                "template": {"metadata": {"labels": labels, "annotations": {
                    ANNOTATION_CONFIG_DIGEST: config_digest(config_text, rules_text)}}, "spec": spec}}),
        ]
    return objects


def metrics_objects(plan: MetricsPlan, cluster: str, etcd: list[str], remote_write_url: Any, client_id: Any,
                    render_yaml: Any = None) -> list[Object]:
    return [obj("v1", "Namespace", NAMESPACE), *node_exporter_objects(), *kube_state_metrics_objects(),
            *prometheus_objects(plan, cluster, etcd, remote_write_url, client_id, render_yaml)]
