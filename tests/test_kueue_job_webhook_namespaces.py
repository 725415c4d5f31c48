"""Kueue's Job webhooks (failurePolicy Fail) must not cover the namespaces where the platform itself runs Jobs, or
every GPU-operator upgrade and every health recheck is refused while Kueue's controller is down.

What the chart does with our values comes from components/catalog/facts/consumers/values-kueue.json (kueue v0.19.2
charts/kueue/templates/webhook/manifests.yaml, read by tools/extract_consumer_facts.py): the webhooks listed there
take their namespaceSelector from the manager config's `managedJobsNamespaceSelector`. Which charts create Jobs
comes from the same catalogues (`job_templates`: gpu-operator v26.3.3 templates/upgrade_crd.yaml, a pre-upgrade
hook, and cleanup_crd.yaml; NFD v0.18.3 post-delete-job.yaml). The selector is evaluated as a LabelSelector on the
namespace's `kubernetes.io/metadata.name` label (set by the API server on every namespace).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from gpucluster.verify import nccl
from tools.facts_home import CONSUMERS

CATALOGUES = CONSUMERS


def _matches(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    """metav1.LabelSelector: matchLabels and matchExpressions (In, NotIn, Exists, DoesNotExist), all must hold."""
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for e in selector.get("matchExpressions") or []:
        present, value = e["key"] in labels, labels.get(e["key"])
        held = {"In": present and value in e.get("values", []), "NotIn": not present or value not in e.get("values", []),
                "Exists": present, "DoesNotExist": not present}[e["operator"]]
        if not held:
            return False
    return True


def _job_webhook_selector(out: Path) -> dict[str, Any]:
    kueue = json.loads((CATALOGUES / "values-kueue.json").read_text())
    assert {"mjob.kb.io", "vjob.kb.io"} <= set(kueue["webhooks_following_managed_jobs_namespace_selector"])
    [release] = [r for r in (yaml.safe_load(p.read_text()) for p in (out / "charts").glob("*.yaml"))
                 if r["name"] == "kueue"]
    config = yaml.safe_load(release["values"]["managerConfig"]["controllerManagerConfigYaml"])
    return config["managedJobsNamespaceSelector"]


def _covered(selector: dict[str, Any], namespace: str, labels: dict[str, str] | None = None) -> bool:
    """The API server sets `kubernetes.io/metadata.name` on every namespace; `labels` are the ones it is made with."""
    return _matches(selector, {**(labels or {}), "kubernetes.io/metadata.name": namespace})


def _namespaces_running_jobs(out: Path) -> set[str]:
    """Releases whose chart creates Jobs, the plan's own Jobs and CronJobs, and verify --nccl's Job."""
    found = {nccl.NAMESPACE}
    for path in (out / "charts").glob("*.yaml"):
        release = yaml.safe_load(path.read_text())
        if json.loads((CATALOGUES / f"values-{release['name']}.json").read_text())["job_templates"]:
            found.add(release["namespace"])
    for path in (out / "manifests").glob("*.yaml"):
        for o in yaml.safe_load_all(path.read_text()):
            if o and o.get("kind") in ("Job", "CronJob"):
                found.add(o["metadata"]["namespace"])
    return found


def test_platform_jobs_are_outside_kueues_job_webhooks(dev_out: Path) -> None:
    selector = _job_webhook_selector(dev_out)
    running = _namespaces_running_jobs(dev_out)
    assert {"gpu-operator", "gpucluster-health"} <= running
    assert {ns for ns in running if _covered(selector, ns)} == set()
    assert not _covered(selector, "kube-system") and not _covered(selector, "kueue-system")


def test_team_namespaces_stay_covered_and_no_other_does(dev_out: Path) -> None:
    selector = _job_webhook_selector(dev_out)
    teams = [yaml.safe_load(p.read_text())["metadata"] for p in (dev_out / "manifests").glob("*namespace-team-*")]
    assert teams and all(_covered(selector, t["name"], t["labels"]) for t in teams)
    # a namespace a cluster admin makes (no LocalQueue): Kueue's fail-closed pod webhook would gate its pods for good
    assert not _covered(selector, "default") and not _covered(selector, "argocd")


def test_the_chart_default_would_cover_them() -> None:
    """Without our selector the chart renders NotIn [kube-system, <release namespace>] (manifests.yaml, the else
    branch): the GPU operator's and the health checks' namespaces are covered."""
    default = {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "NotIn",
                                     "values": ["kube-system", "kueue-system"]}]}
    assert _covered(default, "gpu-operator") and _covered(default, "gpucluster-health")


POD_KINDS = ("Pod", "Deployment", "DaemonSet", "StatefulSet", "ReplicaSet", "Job", "CronJob")


def _namespaces_running_pods(out: Path) -> set[str]:
    """Every chart release's namespace (each chart runs pods) and each namespace the plan's own workloads run in."""
    found = {yaml.safe_load(p.read_text())["namespace"] for p in (out / "charts").glob("*.yaml")}
    for path in (out / "manifests").glob("*.yaml"):
        found |= {o["metadata"]["namespace"] for o in yaml.safe_load_all(path.read_text())
                  if o and o.get("kind") in POD_KINDS}
    return found


def test_the_pod_webhook_covers_no_platform_pod(dev_out: Path) -> None:
    """With the `pod` integration on, the chart's mpod.kb.io fails closed on what managedJobsNamespaceSelector
    covers: a platform pod there (a DaemonSet's, the registry's, Cilium's) could not start while Kueue is down."""
    kueue = json.loads((CATALOGUES / "values-kueue.json").read_text())
    assert "mpod.kb.io" in kueue["webhooks_following_managed_jobs_namespace_selector"]
    selector = _job_webhook_selector(dev_out)
    running = _namespaces_running_pods(dev_out)
    assert {"kube-system", "gpu-operator", "kueue-system", "gpucluster-metrics"} <= running
    assert {ns for ns in running if _covered(selector, ns)} == set()
