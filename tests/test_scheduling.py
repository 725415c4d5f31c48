"""Scheduling: the planner (quotas per flavor, capacity, priorities) and the objects it becomes."""

from __future__ import annotations

import filecmp
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from gpucluster.bootstrap.scheduler import scheduler_configuration
from gpucluster.errors import SpecError
from gpucluster.kubernetes.objects.kueue import kueue_chart_values, kueue_configuration, kueue_objects
from gpucluster.kubernetes.objects.priority import priority_classes
from gpucluster.offline.engine import ProgramRun, run_program
from gpucluster.offline.manifests import helm_releases, kubernetes_objects
from gpucluster.planning.cluster_plan import plan_cluster
from gpucluster.planning.scheduling import (
    AUTOSCALER_EXPENDABLE_CUTOFF,
    BALLOON_CLASS,
    PRIORITY_CLASSES,
    TOPOLOGY_LEVELS,
    WORKLOAD_CLASSES,
    split_proportionally,
)
from gpucluster.project import project_root
from gpucluster.spec import ClusterSpec
from tests.support.manifest_validation import CRD_ROOT, shared_schema_dir, validate_object
from tests.support.stacks import small_cluster, small_spec, stack_spec

ROOT = project_root(Path(__file__).parent)


@given(st.integers(0, 10**7), st.lists(st.integers(1, 10**5), min_size=1, max_size=8))
def test_split_proportionally_sums_exactly_and_stays_within_one(total: int, weights: list[int]) -> None:
    parts = split_proportionally(total, weights)
    assert sum(parts) == total and all(p >= 0 for p in parts)
    for part, weight in zip(parts, weights, strict=True):
        assert abs(part - total * weight / sum(weights)) < 1


def test_priority_order() -> None:
    values = {p.name: p.value for p in PRIORITY_CLASSES}
    # Balloons sit below every workload class, and not below the autoscaler's cutoff (they still scale up).
    assert BALLOON_CLASS.value < min(p.value for p in WORKLOAD_CLASSES)
    assert BALLOON_CLASS.value >= AUTOSCALER_EXPENDABLE_CUTOFF
    assert values["gpucluster-system"] > values["production-training"] > values["research"] > values["preemptible"]
    assert [p.name for p in PRIORITY_CLASSES if p.global_default] == ["research"]
    assert all(p.value <= 1_000_000_000 for p in PRIORITY_CLASSES)  # user classes stop at 1e9
    objects = {o["metadata"]["name"]: o for o in priority_classes()}
    assert objects["balloon"]["preemptionPolicy"] == "Never" and objects["preemptible"]["preemptionPolicy"] == "Never"


def test_prod_queues_follow_team_quotas(prod_spec: ClusterSpec) -> None:
    plan = plan_cluster(prod_spec).scheduling
    workload_pools = [p.name for p in prod_spec.pools if p.kind.value != "system"]
    assert [f.name for f in plan.flavors] == workload_pools  # one flavor per workload pool, in stack order
    h100 = next(f for f in plan.flavors if f.name == "h100")
    assert h100.topology == "infiniband" and h100.node_labels == {"gpucluster.io/pool": "h100", "gpucluster.io/admission": "open"}
    confidential = next(f for f in plan.flavors if f.name == "confidential")
    # Pods are never given the confidential toleration: they must ask for it.
    assert {t.key for t in confidential.node_taints} - {t.key for t in confidential.tolerations} == \
        {"gpucluster.io/confidential"}
    pretraining = next(t for t in plan.teams if t.name == "pretraining")
    flavors = {f.name: f for f in plan.flavors}
    order = [flavors[q.flavor].gpu for q in pretraining.flavors]
    assert order == sorted(order)  # CPU flavors first
    gpu_quotas = [q for q in pretraining.flavors if flavors[q.flavor].gpu]
    spec = next(t for t in prod_spec.teams if t.name == "pretraining")
    assert sum(q.nominal.gpus for q in gpu_quotas) == spec.quota.gpus
    for quota in gpu_quotas:  # each GPU comes with its share of the node's CPUs
        size = flavors[quota.flavor].pool.size
        assert quota.nominal.cpus == quota.nominal.gpus * size.vcpus // size.gpus
    assert sum(q.nominal.gpus for t in plan.teams for q in t.flavors) == sum(t.quota.gpus for t in prod_spec.teams)


def _scheduling_problem(**overrides: Any) -> str:
    with pytest.raises(SpecError) as error:
        plan_cluster(small_spec(**overrides))
    return str(error.value)


def test_quota_beyond_capacity_is_an_error_unless_declared() -> None:
    teams = [{"name": "aa", "quota": {"gpus": 800}}, {"name": "bb", "quota": {"gpus": 500}}]
    message = _scheduling_problem(teams=teams)
    assert "cluster.teams: nominal GPUs quota on pool gpu adds up to 1,300 (aa 800, bb 500), more than its 1,200" in message
    plan = plan_cluster(small_spec(teams=teams, inCluster={"quotaOversubscription": {"note": "burst pool, see runbook"}}))
    assert plan.scheduling.oversubscribed == {"gpu": ["GPUs", "vCPUs", "memory"]}


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({"teams": [{"name": "aa", "pools": ["system"]}]}, "cluster.teams[0].pools[0]: 'system' is a system pool"),
        ({"teams": [{"name": "aa", "pools": ["nope"]}]}, "cluster.teams[0].pools[0]: 'nope' is not a pool"),
        ({"teams": [{"name": "aa", "quota": {"cpus": 4}}]}, "cluster.teams[0].quota.cpus: cpus and memoryGib are quota"),
        ({"teams": [{"name": "aa"}, {"name": "aa"}]}, "cluster.teams[1].name: duplicate team name 'aa'"),
        ({"kubernetesVersion": "1.31.4"}, "cluster.kubernetesVersion: Kubernetes 1.31 has no coupled versions"),
    ],
)
def test_scheduling_input_errors(overrides: dict[str, Any], expected: str) -> None:
    assert expected in _scheduling_problem(**overrides)


def test_kueue_configuration_turns_on_fair_sharing_and_gangs() -> None:
    config = kueue_configuration(10)
    assert config["apiVersion"] == "config.kueue.x-k8s.io/v1beta2"
    assert config["fairSharing"]["preemptionStrategies"][0] == "LessThanOrEqualToFinalShare"
    assert config["waitForPodsReady"]["timeout"] == "10m"
    values = kueue_chart_values(10)
    assert yaml.safe_load(values["managerConfig"]["controllerManagerConfigYaml"]) == config
    assert values["controllerManager"]["manager"]["image"]["tag"] == "v0.19.2"
    assert values["controllerManager"]["replicas"] >= 2
    assert values["controllerManager"]["topologySpreadConstraints"][0]["topologyKey"] == "topology.kubernetes.io/zone"


def test_scheduler_profile_bin_packs_without_a_gang_plugin() -> None:
    """Stock kube-scheduler: no out-of-tree plugin, so no scheduler build tied to one Kubernetes minor."""
    config = scheduler_configuration()
    profile = config["profiles"][0]
    assert profile["schedulerName"] == "default-scheduler" and "plugins" not in profile
    args = {c["name"]: c["args"] for c in profile["pluginConfig"]}
    assert set(args) == {"NodeResourcesFit"}
    strategy = args["NodeResourcesFit"]["scoringStrategy"]
    weights = {r["name"]: r["weight"] for r in strategy["resources"]}
    assert strategy["type"] == "MostAllocated" and weights["nvidia.com/gpu"] > weights["cpu"]


def test_control_plane_runs_the_stock_scheduler_with_the_profile() -> None:
    from tests.support.apiserver_documents import kubeadm_documents, render_apiserver_document
    document = render_apiserver_document(())
    files = {f["path"]: f["content"] for f in document["write_files"]}  # type: ignore[index, union-attr]
    init, cluster, _ = kubeadm_documents(document)  # the third document is the KubeletConfiguration
    # the patches folder holds only the kubelet's providerID patch, written at boot: no kube-scheduler patch
    assert init["patches"] == {"directory": "/etc/kubernetes/patches"}  # type: ignore[index]
    assert not [p for p in files if p.startswith("/etc/kubernetes/patches/")]
    scheduler = cluster["scheduler"]  # type: ignore[index]
    assert {"name": "config", "value": "/etc/kubernetes/scheduler-config.yaml"} in scheduler["extraArgs"]  # type: ignore[index]
    assert yaml.safe_load(files["/etc/kubernetes/scheduler-config.yaml"]) == scheduler_configuration()


def test_prod_manifests_hold_the_scheduling_layer(prod_run: ProgramRun) -> None:
    objects = kubernetes_objects(prod_run.registrations)
    kinds = {(o["kind"], o["metadata"]["name"]) for o in objects}
    assert {("Topology", "infiniband"), ("ResourceFlavor", "h100"), ("ResourceFlavor", "cpu"), ("Cohort", "prod"),
            ("ClusterQueue", "pretraining"), ("LocalQueue", "research"), ("Namespace", "team-evals"),
            ("PriorityClass", "balloon")} <= kinds
    # Gangs are Kueue's: nothing of scheduler-plugins (built for one minor) is installed.
    assert not [o for o in objects if "scheduling.x-k8s.io" in o["apiVersion"] or "podgroup" in o["metadata"]["name"]]
    assert not [o for o in objects if o["apiVersion"].startswith("kueue.x-k8s.io/") and
                o["apiVersion"] != "kueue.x-k8s.io/v1beta2"]
    topology = next(o for o in objects if o["kind"] == "Topology")
    assert [level["nodeLabel"] for level in topology["spec"]["levels"]] == list(TOPOLOGY_LEVELS)
    for obj in objects:
        validate_object(obj)
    kueue = next(r for r in helm_releases(prod_run.registrations) if r["name"] == "kueue")
    assert kueue["chart"] == "oci://registry.k8s.io/kueue/charts/kueue" and kueue["version"] == "0.19.2"
    queue = next(r for r in prod_run.registrations if r.name == "clusterqueue-pretraining")
    # The program declares more than one kubernetes provider (the join tokens have their own): take the one the
    # layer's objects go through, from the provider reference (`<urn>::<id>`) the engine records for each resource.
    provider = next(r for r in prod_run.registrations if r.urn == queue.provider.rsplit("::", 1)[0])
    assert provider.type == "pulumi:providers:kubernetes" and provider.inputs["kubeconfig"] == "[secret]"
    # The layer waits for the API servers' /readyz (tests/test_first_up.py): every object goes through this provider.
    assert any(d.endswith("Command::prod-in-cluster-api-ready") for d in provider.dependencies)
    assert any(d.endswith("Release::prod-in-cluster-scheduling-kueue") for d in queue.dependencies)


def test_a_broken_object_fails_validation() -> None:
    plan = plan_cluster(stack_spec("dev")).scheduling
    queue = next(o for o in kueue_objects(plan) if o["kind"] == "ClusterQueue")
    queue["spec"]["queueingStrategy"] = "Whenever"
    with pytest.raises(Exception, match="Whenever"):
        validate_object(queue)
    flavor = next(o for o in kueue_objects(plan) if o["kind"] == "ResourceFlavor")
    flavor["spec"]["nodeLabels"] = "gpucluster.io/pool"  # must be a map
    with pytest.raises(Exception, match=r"gpucluster\.io/pool"):
        validate_object(flavor)


def test_layer_off_declares_no_kubernetes_objects() -> None:
    run = run_program(ROOT / "__main__.py", "gpucluster", "test",
                      {"gpucluster:cluster": small_cluster(inCluster={"enabled": False})})
    kube = [r for r in run.registrations if r.type.startswith(("kubernetes:", "pulumi:providers:kubernetes"))]
    assert not [r for r in run.registrations if r.type == "gpucluster:kubernetes:InCluster"]
    # What stays is the join access alone (components/kubernetes/join_access.py): nodes cannot join without the
    # bootstrap tokens, so its provider and objects exist with the layer off.
    join = next(r.urn for r in run.registrations if r.type == "gpucluster:kubernetes:JoinAccess")
    assert kube and not [r.name for r in kube if r.parent != join]


@pytest.mark.skipif(not shared_schema_dir().is_dir(), reason="the shared schema folder is not next to the checkout")
def test_vendored_schemas_match_the_shared_ones() -> None:
    for vendored in CRD_ROOT.glob("*/*.yaml"):
        shared = shared_schema_dir() / vendored.parent.name / vendored.name
        assert filecmp.cmp(vendored, shared, shallow=False), vendored.name


def test_kueue_client_and_workers_are_raised_not_lowered() -> None:
    """Kueue v0.19.2 defaults qps 300 / burst 500 (apis/config/v1beta2/defaults.go) and the chart's default
    config sets controller.groupKindConcurrency (charts/kueue/values.yaml); the chart replaces its whole
    config with ours, so ours must carry both, at least as high."""
    config = kueue_configuration(10)
    assert config["clientConnection"]["qps"] >= 300 and config["clientConnection"]["burst"] >= 500
    chart = {"Job.batch": 5, "Pod": 5, "Workload.kueue.x-k8s.io": 10, "LocalQueue.kueue.x-k8s.io": 5,
             "ClusterQueue.kueue.x-k8s.io": 5, "ResourceFlavor.kueue.x-k8s.io": 1}
    ours = config["controller"]["groupKindConcurrency"]
    assert all(ours[kind] >= n for kind, n in chart.items())


def test_no_queue_relies_on_what_fair_sharing_ignores(prod_spec: ClusterSpec) -> None:
    """Kueue docs (concepts/preemption, 'Fair Sharing'): with fair sharing on, preemption works with
    withinClusterQueue and reclaimWithinCohort; borrowWithinCohort is not honoured."""
    assert kueue_configuration(10)["fairSharing"]
    queues = [o for o in kueue_objects(plan_cluster(prod_spec).scheduling) if o["kind"] == "ClusterQueue"]
    assert queues and all("borrowWithinCohort" not in q["spec"]["preemption"] for q in queues)
    assert all(q["spec"]["preemption"]["reclaimWithinCohort"] == "Any" for q in queues)


def test_the_documented_gang_job_is_a_kueue_gang() -> None:
    """docs/scheduling.md's example: a valid Job (kubernetes-validate, strict) that Kueue places whole in one
    InfiniBand domain, with nothing from scheduler-plugins."""
    text = (ROOT / "docs" / "scheduling.md").read_text()
    block = text.split("## Submitting a gang job", 1)[1].split("```yaml", 1)[1].split("```", 1)[0]
    documents = [d for d in yaml.safe_load_all(block.replace("<your training image>", "example/trainer:1"))]
    assert [d["kind"] for d in documents] == ["Job"]
    job = documents[0]
    validate_object(job)
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "pretraining" and job["spec"]["suspend"]
    annotations = job["spec"]["template"]["metadata"]["annotations"]
    assert annotations["kueue.x-k8s.io/podset-required-topology"] == TOPOLOGY_LEVELS[1]
    assert "scheduling.x-k8s.io" not in block
