"""Only pods that sign in with a managed identity reach IMDS (components/kubernetes/objects/imds_guard.py).

The rendered CiliumClusterwideNetworkPolicies are judged as Cilium 1.20 judges them: an endpoint is selected by
Kubernetes label-selector rules over its labels (cilium `pkg/policy/api/selector.go`, built on
k8s.io/apimachinery labels: `NotIn` also matches an absent key), its labels carry its namespace and service account
from the `k8s` source (`pkg/k8s/apis/cilium.io/const.go`: io.kubernetes.pod.namespace,
io.cilium.k8s.policy.serviceaccount) besides the pod's own, and an `egressDeny` to a CIDR drops the traffic whatever
allows it (`pkg/policy/api/rule.go`); `enableDefaultDeny` defaults to true for a direction with rules, deny rules
included (same file), so a guard that left it unset would drop every other flow of every pod it selects.
"""

from __future__ import annotations

from typing import Any

import pytest

from gpucluster.kubernetes.objects.images import pod_spec
from gpucluster.kubernetes.objects.imds_guard import (
    ACCOUNT_LABEL,
    IMDS_CIDR,
    KIND,
    NAMESPACE_LABEL,
    identity_accounts,
    imds_policy,
)
from gpucluster.kubernetes.objects.layer import layer_objects
from gpucluster.offline.engine import ProgramRun
from gpucluster.planning.cluster_plan import ClusterPlan, plan_cluster
from gpucluster.spec import ClusterSpec

Labels = dict[str, str]


@pytest.fixture(scope="module")
def prod(prod_spec: ClusterSpec) -> ClusterPlan:
    return plan_cluster(prod_spec)


def _requirement(expression: dict[str, Any], labels: Labels) -> bool:
    key, operator, values = expression["key"], expression["operator"], expression.get("values") or []
    if operator == "In":
        return labels.get(key) in values
    if operator == "NotIn":
        return key not in labels or labels[key] not in values
    if operator == "Exists":
        return key in labels
    if operator == "DoesNotExist":
        return key not in labels
    raise AssertionError(f"operator {operator} is not one Cilium accepts")


def _selects(selector: dict[str, Any], labels: Labels) -> bool:
    return (all(labels.get(k) == v for k, v in (selector.get("matchLabels") or {}).items())
            and all(_requirement(e, labels) for e in selector.get("matchExpressions") or []))


def endpoint_labels(namespace: str, account: str, pod_labels: Labels) -> Labels:
    return {NAMESPACE_LABEL: namespace, ACCOUNT_LABEL: account, **{f"k8s:{k}": v for k, v in pod_labels.items()}}


def reaches_imds(labels: Labels, policies: list[dict[str, Any]]) -> bool:
    for policy in policies:
        spec = policy["spec"]
        if _selects(spec["endpointSelector"], labels) and any(
                IMDS_CIDR in rule.get("toCIDR", []) for rule in spec.get("egressDeny") or []):
            return False
    return True


def _workloads(objects: list[dict[str, Any]]) -> list[tuple[str, str, Labels, dict[str, Any]]]:
    found = []
    for o in objects:
        pod = pod_spec(o)
        if pod is None or pod.get("hostNetwork"):
            continue
        template = o["spec"]["jobTemplate"]["spec"]["template"] if o["kind"] == "CronJob" else o["spec"]["template"]
        found.append((o["metadata"]["name"], o["metadata"].get("namespace", "default"),
                      (template.get("metadata") or {}).get("labels") or {}, pod))
    return found


def test_only_the_identities_pods_reach_imds(prod: ClusterPlan) -> None:
    objects = layer_objects(prod)
    policies = [o for o in objects if o["kind"] == KIND]
    assert policies
    verdicts = {name: reaches_imds(endpoint_labels(ns, pod.get("serviceAccountName") or "default", labels), policies)
                for name, ns, labels, pod in _workloads(objects)}
    # The edge Prometheus shards remote-write as the metrics identity (docs/metrics.md); kube-state-metrics beside
    # them in the same namespace does not sign in.
    shards = {f"prometheus-{i}" for i in range(prod.metrics.shards)} if prod.metrics else set()
    assert {name for name, reaches in verdicts.items() if reaches} == {"cluster-autoscaler", "cloud-node-lifecycle",
                                                                        *shards}
    assert shards and not verdicts["kube-state-metrics"]
    assert not verdicts["coredns"] and not any(v for n, v in verdicts.items() if n.startswith("gpu-health"))


def test_a_pod_cannot_label_itself_past_the_guard(prod: ClusterPlan) -> None:
    policies = [o for o in layer_objects(prod) if o["kind"] == KIND]
    impostor = endpoint_labels("kube-system", "default", {"app.kubernetes.io/name": "cluster-autoscaler"})
    assert not reaches_imds(impostor, policies)
    assert not reaches_imds(endpoint_labels("team-a", "default", {}), policies)  # a training job
    assert not reaches_imds(endpoint_labels("kueue-system", "kueue-controller-manager", {}), policies)


def test_the_guard_drops_nothing_else() -> None:
    for policy in imds_policy([]):
        spec = policy["spec"]
        assert spec["enableDefaultDeny"] == {"ingress": False, "egress": False}
        assert spec["egressDeny"] == [{"toCIDR": [IMDS_CIDR]}] and "egress" not in spec and "ingress" not in spec


def test_the_exemptions_are_read_from_the_pods(prod: ClusterPlan) -> None:
    objects = layer_objects(prod)
    assert identity_accounts(objects) == {"kube-system": {"cluster-autoscaler", "cloud-node-lifecycle"},
                                          "gpucluster-metrics": {"prometheus"}}
    scaler = next(o for o in objects if o["kind"] == "Deployment" and o["metadata"]["name"] == "cluster-autoscaler")
    for container in scaler["spec"]["template"]["spec"]["containers"]:
        container["env"] = [e for e in container.get("env") or [] if e["name"] != "ARM_USE_MANAGED_IDENTITY_EXTENSION"]
    # The shards sign in through their mounted config (remote_write azuread.managed_identity): without it, nothing.
    for o in objects:
        if o["kind"] == "ConfigMap" and o["metadata"]["name"].startswith("prometheus-") and "prometheus.yml" in o["data"]:
            o["data"]["prometheus.yml"] = o["data"]["prometheus.yml"].replace("managed_identity", "sdk")
    assert identity_accounts(objects) == {"kube-system": {"cloud-node-lifecycle"}}


def test_declared_after_the_cni_gate(prod_run: ProgramRun) -> None:
    guards = [r for r in prod_run.registrations if r.inputs.get("kind") == KIND]
    gate = next(r.urn for r in prod_run.registrations if r.name.endswith("-cni-ready"))
    # One for every namespace, one per namespace with an identity (kube-system, gpucluster-metrics).
    assert len(guards) == 3 and all(gate in r.dependencies for r in guards)
