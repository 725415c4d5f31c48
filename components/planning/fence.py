"""The rollout's fence: what stops Kueue from admitting new workloads onto a domain's nodes without evicting or
replacing the gangs already running there (docs/operations.md, "Rolling a node image or boot change").

Every node joins with `gpucluster.io/admission=open` and every Kueue ResourceFlavor requires it in its nodeLabels
(planning/scheduling.py). To fence a node the rollout controller sets the label to `fenced`. Read in kueue v0.19.2
(commit 8eab68778fc1b52affe165fdf5af29d1e9b4f3cb):

- Admission: a topology-aware flavor places pods only on the nodes its snapshot holds, and the snapshot keeps a node
  only when every label of the flavor's nodeLabels has the flavor's value (pkg/cache/scheduler/tas_nodes_cache.go
  `find`, lines 106-123, calling pkg/util/tas/node.go `NodeMatchesFlavor`, lines 21-33). A fenced node is out of
  every new placement. Kueue also copies the flavor's nodeLabels into the admitted pods' nodeSelector
  (pkg/podset/podset.go `FromAssignment`, line 87), so the kube-scheduler keeps new pods of non-topology flavors (CPU
  pools) off fenced nodes too.
- No eviction: the TAS node controller reconciles a node on a change of its Ready condition or of its taints only
  (pkg/controller/tas/node_controller.go `Update`, lines 216-233), and judges a workload there by readiness and
  NoSchedule/NoExecute taints it does not tolerate (`getWorkloadStatus`, lines 361-412; `hasSchedulingTaints`,
  lines 414-418). A label is neither: a running gang on a fenced node stays healthy.
- Why not `kubectl cordon` or a taint: with TASReplaceNodeOnNodeTaints (beta, on by default from 0.17,
  pkg/features/kube_features.go lines 814-816) an untolerated NoSchedule taint makes a workload on the node unhealthy
  as soon as none of its pods there is still running (`checkPodsOnNode`, lines 480-484): its node is marked for
  replacement, or the workload evicted when another node of it already was (`evictWorkloadIfNeeded`). The cordon taint
  `node.kubernetes.io/unschedulable:NoSchedule` has no special case there.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpucluster.vocabulary import LABEL_ADMISSION


@dataclass(frozen=True)
class Fence:
    label: str
    open: str
    fenced: str


FENCE = Fence(LABEL_ADMISSION, "open", "fenced")
