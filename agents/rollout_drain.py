"""What runs on a wave's nodes and how each kind of it leaves (the rollout controller's drain half, rollout.py).
Standard library only.

Read against kueue v0.19.2 (commit 8eab6877):
- A topology-aware gang names its nodes in its Workload's admission (apis/kueue/v1beta2/workload_types.go
  TopologyAssignment: per level, a universal value or prefix + roots + suffix).
- A Workload admitted without topology (CPU and confidential flavors) names no node. Its pods carry
  `kueue.x-k8s.io/podset` (pkg/constants/constants.go PodSetLabel, set when the job is started,
  pkg/controller/jobframework/reconciler.go line 1756), and the Workload carries the UID of the job that owns it in
  `kueue.x-k8s.io/job-uid` (pkg/controller/constants/constants.go JobUIDLabel, reconciler.go line 1355) and in its
  ownerReferences. A pod's job is its controller (a batch Job), or for a JobSet's pods the JobSet named by
  `jobset.sigs.k8s.io/jobset-uid` (jobset v0.12.0 api/jobset/v1alpha2/jobset_types.go JobSetUIDKey).
- A finished Workload keeps its admission and QuotaReserved and ignores `spec.active` (make e2e,
  e2e/tests/test_kueue_dev.py): nothing of it runs, so it counts as gone.
Both kinds of Workload leave by deactivation (`spec.active: false`: evicted whole, requeued whole once reactivated);
the controller marks each Workload it deactivates with DEACTIVATED_BY, so it reactivates exactly those, whatever its
own state says. Anything else (not a DaemonSet's, not a static pod, not finished) leaves by the Eviction API, which
honours PodDisruptionBudgets (policy/v1 Eviction; 429 while a budget forbids it)."""

from __future__ import annotations

from typing import Any

WORKLOADS = "/apis/kueue.x-k8s.io/v1beta2"
PODSET_LABEL = "kueue.x-k8s.io/podset"
JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"
JOBSET_UID_LABEL = "jobset.sigs.k8s.io/jobset-uid"
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
DEACTIVATED_BY = "gpucluster.io/deactivated-by-rollout"
"""On a Workload the controller deactivated: the wave's scale sets. It reactivates the Workload and removes the mark
in one patch once the Workload holds no quota and no node of a wave."""


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def meta(thing: dict[str, Any]) -> dict[str, Any]:
    return _dict(thing.get("metadata"))


def key(thing: dict[str, Any]) -> str:
    return f"{meta(thing).get('namespace')}/{meta(thing).get('name')}"


def condition(thing: dict[str, Any], kind: str) -> bool:
    return any(_dict(c).get("type") == kind and _dict(c).get("status") == "True"
               for c in _list(_dict(thing.get("status")).get("conditions")))


def finished(workload: dict[str, Any]) -> bool:
    return condition(workload, "Finished")


def reserved(workload: dict[str, Any]) -> bool:
    return condition(workload, "QuotaReserved")


def assigned_values(workload: dict[str, Any]) -> set[str]:
    """Every topology value (node name, domain) of a Workload's admission."""
    found: set[str] = set()
    admission = _dict(_dict(workload.get("status")).get("admission"))
    for assignment in _list(admission.get("podSetAssignments")):
        topology = _dict(_dict(assignment).get("topologyAssignment"))
        for piece in _list(topology.get("slices")):
            for level in _list(_dict(piece).get("valuesPerLevel")):
                level = _dict(level)
                if isinstance(level.get("universal"), str):
                    found.add(level["universal"])
                individual = _dict(level.get("individual"))
                prefix, suffix = str(individual.get("prefix") or ""), str(individual.get("suffix") or "")
                found.update(f"{prefix}{root}{suffix}" for root in _list(individual.get("roots")) if isinstance(root, str))
    return found


def daemon_or_static(pod: dict[str, Any]) -> bool:
    """A DaemonSet's pod (it belongs on the node) or a static pod's mirror (the kubelet's own)."""
    return (any(_dict(o).get("kind") == "DaemonSet" for o in _list(meta(pod).get("ownerReferences")))
            or MIRROR_ANNOTATION in _dict(meta(pod).get("annotations")))


def terminal(pod: dict[str, Any]) -> bool:
    return _dict(pod.get("status")).get("phase") in ("Succeeded", "Failed")


def job_uids(pod: dict[str, Any]) -> set[str]:
    """The UIDs a Kueue Workload may name as its job for this pod: its controller's, and its JobSet's."""
    found = {str(_dict(o).get("uid")) for o in _list(meta(pod).get("ownerReferences"))
             if _dict(o).get("controller") is True and _dict(o).get("uid")}
    jobset = _dict(meta(pod).get("labels")).get(JOBSET_UID_LABEL)
    if isinstance(jobset, str) and jobset:
        found.add(jobset)
    return found


def workload_job_uids(workload: dict[str, Any]) -> set[str]:
    found = {str(_dict(o).get("uid")) for o in _list(meta(workload).get("ownerReferences")) if _dict(o).get("uid")}
    label = _dict(meta(workload).get("labels")).get(JOB_UID_LABEL)
    if isinstance(label, str) and label:
        found.add(label)
    return found


def placed(workloads: list[dict[str, Any]], nodes: set[str], pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The unfinished Workloads with anything on `nodes`: by their topology assignment, or through the Kueue-managed
    pods running there (`pods`: the pods on those nodes)."""
    owners: set[str] = set()
    for pod in pods:
        if PODSET_LABEL in _dict(meta(pod).get("labels")) and not terminal(pod):
            owners |= job_uids(pod)
    return [w for w in workloads if not finished(w) and reserved(w)
            and (assigned_values(w) & nodes or workload_job_uids(w) & owners)]


def loose(pods: list[dict[str, Any]], workloads: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The pods that leave by eviction: not a DaemonSet's or static, not finished, not a Kueue Workload's (those leave
    with their Workload)."""
    kueue_jobs: set[str] = set()
    for w in workloads:
        kueue_jobs |= workload_job_uids(w)
    return [p for p in pods if not daemon_or_static(p) and not terminal(p)
            and not (PODSET_LABEL in _dict(meta(p).get("labels")) and job_uids(p) & kueue_jobs)
            and not meta(p).get("deletionTimestamp")]


def eviction(pod: dict[str, Any]) -> dict[str, Any]:
    """The policy/v1 Eviction a POST to the pod's `eviction` subresource carries."""
    return {"apiVersion": "policy/v1", "kind": "Eviction",
            "metadata": {"name": meta(pod).get("name"), "namespace": meta(pod).get("namespace")}}
