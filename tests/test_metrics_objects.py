"""The pipeline's objects against what their consumers accept (extracted from their sources at the pinned tags by
tools/extract_metrics_consumers.py), and the references between them."""

from __future__ import annotations

import hashlib
from collections import Counter
from typing import Any

import pytest
import yaml

from gpucluster.catalog import metrics_consumers as consumers
from gpucluster.catalog.fact_files import load_facts
from gpucluster.catalog.in_cluster import GPU_OPERATOR_NAMESPACE
from gpucluster.catalog.metrics import TRAINING_COUNTERS
from gpucluster.catalog.versions import GPU_OPERATOR
from gpucluster.kubernetes.objects.charts import DCGM_COUNTERS_CONFIG, gpu_operator_values
from gpucluster.kubernetes.objects.imds_guard import identity_accounts
from gpucluster.kubernetes.objects.layer import layer_objects, telemetry_objects
from gpucluster.kubernetes.objects.metrics import DCGM_EXPORTER_PORT, NAMESPACE, PROMETHEUS, prometheus_config
from gpucluster.planning.cluster_plan import ClusterPlan, plan_cluster
from gpucluster.planning.metrics_rules import RECORDING_RULES
from tests.support.stacks import small_spec, stack_spec

LABEL_MAPS = {"external_labels", "labels"}
"""Keys whose values map label names to values, not configuration keys."""


@pytest.fixture(scope="module")
def plan() -> ClusterPlan:
    return plan_cluster(small_spec())


def config_keys(node: Any, parent: str = "") -> set[str]:
    if isinstance(node, dict):
        own = set() if parent in LABEL_MAPS else set(node)
        return own.union(*(config_keys(v, k) for k, v in node.items()))
    if isinstance(node, list):
        return set().union(*(config_keys(v, parent) for v in node))
    return set()


def relabels(config: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for job in config["scrape_configs"]:
        out += job.get("relabel_configs", []) + job.get("metric_relabel_configs", [])
    return out + [r for w in config["remote_write"] for r in w["write_relabel_configs"]]


def objects(plan: ClusterPlan) -> list[dict[str, Any]]:
    return telemetry_objects(plan, "https://example.invalid/write", "client-id")


def container(objs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    o = next(o for o in objs if o["kind"] == kind and o["metadata"]["name"] == name)
    return o["spec"]["template"]["spec"]["containers"][0]


def flags(args: list[str]) -> set[str]:
    return {a.removeprefix("--").split("=", 1)[0] for a in args}


def test_every_prometheus_key_exists_in_v3_14(plan: ClusterPlan) -> None:
    for shard in (0, 1):
        config = prometheus_config(plan.metrics, shard, "test", ["10.0.0.1:2381"], "https://x/write", "id")
        assert config_keys(config) <= set(consumers.PROMETHEUS_CONFIG_KEYS), \
            config_keys(config) - set(consumers.PROMETHEUS_CONFIG_KEYS)
        assert {r["action"] for r in relabels(config)} <= set(consumers.PROMETHEUS_RELABEL_ACTIONS)
        roles = {sd["role"] for job in config["scrape_configs"] for sd in job.get("kubernetes_sd_configs", [])}
        assert roles <= set(consumers.PROMETHEUS_KUBERNETES_ROLES)


def test_a_misspelt_key_is_caught(plan: ClusterPlan) -> None:
    config = prometheus_config(plan.metrics, 0, "test", [], "https://x/write", "id")
    config["remote_writes"] = config.pop("remote_write")  # UnmarshalStrict refuses it; so does this check
    assert not config_keys(config) <= set(consumers.PROMETHEUS_CONFIG_KEYS)


def test_flags_exist_in_each_program(plan: ClusterPlan) -> None:
    objs = objects(plan)
    assert flags(container(objs, "StatefulSet", f"{PROMETHEUS}-0")["args"]) <= set(consumers.PROMETHEUS_FLAGS)
    node_exporter = flags(container(objs, "DaemonSet", "node-exporter")["args"])
    assert node_exporter <= set(consumers.NODE_EXPORTER_FLAGS), node_exporter - set(consumers.NODE_EXPORTER_FLAGS)
    assert {f.removeprefix("collector.") for f in node_exporter if f.startswith("collector.")} - {"disable-defaults"} \
        <= set(consumers.NODE_EXPORTER_KNOWN_COLLECTORS)
    assert flags(container(objs, "Deployment", "kube-state-metrics")["args"]) <= set(consumers.KSM_FLAGS)
    assert "lease-resource-name" not in consumers.PROMETHEUS_FLAGS  # the check can fail


def test_edge_rules_file_is_the_plan_rules(plan: ClusterPlan) -> None:
    rules = next(o for o in objects(plan) if o["metadata"]["name"] == f"{PROMETHEUS}-rules")
    groups = yaml.safe_load(rules["data"]["edge.yml"])["groups"]
    assert [r["record"] for g in groups for r in g["rules"]] == [r.record for r in RECORDING_RULES]


def test_the_shards_sign_in_and_nothing_else_there_does(plan: ClusterPlan) -> None:
    accounts = identity_accounts(layer_objects(plan))
    assert accounts[NAMESPACE] == {PROMETHEUS}


def test_dcgm_exporter_runs_the_training_counters() -> None:
    config = gpu_operator_values()["dcgmExporter"]["config"]
    assert config["name"] == DCGM_COUNTERS_CONFIG and config["create"] is True
    fields = [line.split(",")[0] for line in config["data"].splitlines()]
    assert fields == [c.field for c in TRAINING_COUNTERS]


def hashmod(value: str, modulus: int) -> int:
    """Prometheus v3.14.0 model/relabel/relabel.go HashMod: the last 8 bytes of the MD5, big-endian, mod modulus."""
    return int.from_bytes(hashlib.md5(value.encode()).digest()[8:], "big") % modulus


def test_prod_nodes_spread_evenly_over_the_shards() -> None:
    """Each shard's memory is sized for raw/shards series: the node hash must not load one shard much more."""
    plan = plan_cluster(stack_spec("prod"))
    assert plan.metrics.shards > 1
    shards = plan.metrics.shards
    names = [f"{s.name}{i:06d}" for p in plan.pools for s in p.scale_sets for i in range(s.capacity)]
    load = Counter(hashmod(n, shards) for n in names)
    assert set(load) == set(range(shards))
    assert max(load.values()) <= 1.1 * len(names) / shards


OPERANDS = load_facts("consumers/operands-gpu-operator.json")
"""The GPU operator's operand DaemonSets' pod labels and ports at the pinned tag (tools/gpu_operator_operands.py)."""


def _selected(selector: str, labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in (term.split("=", 1) for term in selector.split(",")))


def test_every_pod_discovery_selects_pods_that_carry_its_labels_and_port(plan: ClusterPlan) -> None:
    """A shard finds its targets by pod labels: in the GPU operator's namespace, the operand's own labels (read from
    its DaemonSet asset: `app: nvidia-dcgm-exporter`, not app.kubernetes.io/name); in the pipeline's namespace, the
    pod templates rendered beside it. A selector no pod carries scrapes nothing and every rule on it reads empty."""
    objs = objects(plan)
    templates = [(o["metadata"]["namespace"], o["spec"]["template"]) for o in objs
                 if o["kind"] in ("DaemonSet", "Deployment", "StatefulSet")]
    operator_pods = [(op["podLabels"], op["containerPorts"]) for op in OPERANDS["operands"].values()]
    metrics = plan.metrics
    assert metrics is not None
    jobs = [j for shard in range(metrics.shards)
            for j in prometheus_config(metrics, shard, plan.spec.name, [], "https://example.invalid/w", "c")[
                "scrape_configs"]]
    checked = 0
    for job in jobs:
        for sd in job.get("kubernetes_sd_configs", []):
            if sd["role"] != "pod":
                continue
            (namespace,) = sd["namespaces"]["names"]
            (selector,) = [s["label"] for s in sd["selectors"]]
            ports = [int(r["regex"]) for r in job.get("relabel_configs", [])
                     if r.get("source_labels") == ["__meta_kubernetes_pod_container_port_number"]]
            if namespace == GPU_OPERATOR_NAMESPACE:
                matches = [p for labels, p in operator_pods if _selected(selector, labels)]
                assert matches and all(port in matches[0] for port in ports), (job["job_name"], selector)
            else:
                pods = [t for ns, t in templates if ns == namespace and _selected(selector, t["metadata"]["labels"])]
                assert pods, (job["job_name"], selector)
                declared = {p["containerPort"] for c in pods[0]["spec"]["containers"] for p in c.get("ports", [])}
                assert set(ports) <= declared, (job["job_name"], ports, declared)
            checked += 1
    assert checked >= 2 * metrics.shards


def test_the_operand_catalogue_is_read_at_the_operator_version_the_cluster_runs() -> None:
    assert OPERANDS["tag"] == GPU_OPERATOR.version and len(OPERANDS["commit"]) == 40
    assert OPERANDS["operands"]["nvidia-dcgm-exporter"]["containerPorts"] == [DCGM_EXPORTER_PORT]


def _shard(objs: list[dict[str, Any]]) -> dict[str, Any]:
    return next(o for o in objs if o["metadata"]["name"] == f"{PROMETHEUS}-0" and o["kind"] != "ConfigMap")


def test_a_shard_keeps_its_replica_names_and_rolls_on_a_changed_config_or_rule(
        plan: ClusterPlan, monkeypatch: pytest.MonkeyPatch) -> None:
    """A Deployment's pods get new names on every restart, and `replica: ${POD_NAME}` then writes a new set of
    series; Prometheus v3.14.0 reads its files at start only (no reload flag is set): the digest on the template
    rolls the pods when either file changes."""
    from gpucluster.kubernetes.objects import metrics
    from gpucluster.vocabulary import ANNOTATION_CONFIG_DIGEST

    shard = _shard(objects(plan))
    assert shard["kind"] == "StatefulSet" and shard["spec"]["replicas"] == 2
    config = prometheus_config(plan.metrics, 0, "test", [], "https://example.invalid/write", "client-id")
    assert config["global"]["external_labels"]["replica"] == "${POD_NAME}"
    assert not any(a.startswith(("--config.auto-reload", "--web.enable-lifecycle"))
                   for a in shard["spec"]["template"]["spec"]["containers"][0]["args"])
    digest = shard["spec"]["template"]["metadata"]["annotations"][ANNOTATION_CONFIG_DIGEST]
    assert _shard(objects(plan))["spec"]["template"]["metadata"]["annotations"][ANNOTATION_CONFIG_DIGEST] == digest
    moved = telemetry_objects(plan, "https://example.invalid/other", "client-id")
    assert _shard(moved)["spec"]["template"]["metadata"]["annotations"][ANNOTATION_CONFIG_DIGEST] != digest
    rules = metrics.edge_rules()
    monkeypatch.setattr(metrics, "edge_rules", lambda: {**rules, "groups": rules["groups"][:-1]})
    assert _shard(objects(plan))["spec"]["template"]["metadata"]["annotations"][ANNOTATION_CONFIG_DIGEST] != digest


def test_the_digest_of_a_config_known_at_deploy_is_an_output_of_the_same_digest() -> None:
    from gpucluster.kubernetes.objects.metrics import config_digest

    class Later:  # a Pulumi output's shape: the value is known only through apply
        def __init__(self, value: str) -> None:
            self.value = value

        def apply(self, f: Any) -> Any:
            return f(self.value)

    assert config_digest(Later("global: {}\n"), "groups: []\n") == config_digest("global: {}\n", "groups: []\n")
    assert len(config_digest("a", "b")) == 16
