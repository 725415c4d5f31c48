"""How much memory the API servers need and how large etcd grows, per object kind, from the plan.

Pure. Two parts, each with its source:

- **Objects**: every kind the cluster holds at its largest (nodes, their leases, pods at every node's maxPods,
  events at the scalability envelope's rate) times the size of one such object as the API server stores it
  (components/planning/api_objects.py builds them from the plan). The watch cache keeps every object of every
  kind in each API server; etcd keeps them plus the revisions written since the last compaction.
- **Serving**: what each node costs the API servers beyond its objects (its kubelet's watches and requests,
  the agents on it). The one published measurement at this scale fixes it: OpenAI saw up to 70 GB of heap per
  API server at 7,500 nodes with about 200,000 pod IPs in use ("Scaling Kubernetes to 7,500 nodes", 2021,
  openai.com/index/scaling-kubernetes-to-7500-nodes). The model takes that cluster's objects out of the 70 GB
  (its nodes as the kubelet registers an ND96asr_v4, the A100 size of the time, with the well-known labels only)
  and spreads the rest over its 7,500 nodes. A plan at those counts and shapes gets the 70 GB back; its own
  labels, taints and sizes make its objects, and so its memory, larger or smaller.

etcd: the quota is the live data plus the revisions the API server's compactor leaves (it compacts every
`--etcd-compaction-interval`, 5 minutes by default, to the revision it saw one interval earlier: up to two
intervals of history; kubernetes/apiserver v0.36.3 pkg/storage/storagebackend/config.go DefaultCompactInterval,
pkg/storage/etcd3/compact.go), times room for the free pages compaction leaves until defragmentation
(etcd v3.6 op-guide/maintenance.md, "Defragmentation"). etcd's docs suggest 8 GiB as the quota's maximum and
etcd warns above it (etcd v3.6 dev-guide/limit.md, "Storage size limit"): a plan that needs more is an error.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gpucluster.planning.api_objects import event_object, json_size, lease_object, node_object, pod_object
from gpucluster.planning.taints import NodeTaint
from gpucluster.vocabulary import LABEL_INSTANCE_TYPE, LABEL_REGION, LABEL_ZONE

GIB = 2**30
ANCHOR_HEAP_BYTES = 70e9
ANCHOR_NODES = 7_500
ANCHOR_PODS = 200_000
ANCHOR_SOURCE = ("OpenAI, \"Scaling Kubernetes to 7,500 nodes\" (2021): up to 70 GB of heap per API server at "
                 "7,500 nodes, about 200,000 pod IPs in use")
ENVELOPE_NODES = 5_000
ENVELOPE_EVENTS = 1_000_000
ENVELOPE_OBJECTS_PER_KIND = 150_000
ENVELOPE_BYTES_PER_KIND = 1.5e9
ENVELOPE_SOURCE = ("kubernetes/community sig-scalability/configs-and-limits/thresholds.md: 5,000 nodes, 1,000,000 "
                   "events, 150,000 objects and 1.5 GB per built-in kind; cluster-scope limits scale down with "
                   "the cluster")
COMPACTION_WINDOW_S = 600
"""Two of the API server's 5-minute compaction intervals: the most history its compactor leaves."""
LEASE_RENEW_S = 10
"""kubelet renews its node lease every 0.25 x nodeLeaseDurationSeconds (40 s default): kubernetes
pkg/kubelet/kubelet.go nodeLeaseRenewIntervalFraction; k8s.io/kubelet config/v1beta1 NodeLeaseDurationSeconds."""
NODE_STATUS_S = 300
"""kubelet `nodeStatusReportFrequency` default 5m: a node's status is written at least that often."""
FRAGMENTATION_ROOM = 2.0
"""Freed pages stay in the file until the next defragmentation: the file can reach twice the data."""
UNCOUNTED_ROOM = 2.0
"""Room for the kinds the model does not count (custom resources per pod and node: CiliumEndpoint, CiliumNode,
Kueue Workload; Jobs, ConfigMaps, Secrets): the quota is never tighter than twice the fragmented data."""
ETCD_DEFAULT_QUOTA = 2 * GIB
ETCD_MAX_QUOTA = 8 * GIB
ETCD_QUOTA_SOURCE = "etcd v3.6 dev-guide/limit.md: 2 GiB default, 8 GiB suggested maximum"


@dataclass(frozen=True)
class KindLoad:
    kind: str
    count: int
    bytes_each: int
    writes_per_window: float
    """Revisions one object gets within the compaction window (1: written once, kept as is)."""
    events_store: bool = False
    """Stored in the events etcd when the stack has one (`--etcd-servers-overrides=/events#...`)."""
    why: str = ""

    @property
    def cached_bytes(self) -> int:
        return self.count * self.bytes_each

    @property
    def stored_bytes(self) -> float:
        return self.count * self.bytes_each * max(1.0, self.writes_per_window)


@dataclass(frozen=True)
class ApiLoad:
    """What the cluster holds at its largest, per kind, and what it costs the API servers and etcd."""

    nodes: int
    kinds: tuple[KindLoad, ...]
    serving_bytes_per_node: float

    @property
    def cached_bytes(self) -> int:
        return sum(k.cached_bytes for k in self.kinds)

    @property
    def heap_bytes(self) -> float:
        return self.serving_bytes_per_node * self.nodes + self.cached_bytes

    @property
    def heap_gb(self) -> float:
        return self.heap_bytes / 1e9

    def etcd_bytes(self, events_apart: bool, events_store: bool) -> float:
        """Live data and kept history of the main etcd (`events_store` False) or the events etcd."""
        return sum(k.stored_bytes for k in self.kinds if (k.events_store and events_apart) == events_store)

    def envelope_notes(self) -> list[str]:
        """Where the plan passes sig-scalability's tested envelope (not an error: 7,500 nodes is past it)."""
        notes = []
        for k in self.kinds:
            if not k.events_store and k.count > ENVELOPE_OBJECTS_PER_KIND:
                notes.append(f"{k.count:,} {k.kind} objects (tested envelope: {ENVELOPE_OBJECTS_PER_KIND:,})")
            if not k.events_store and k.cached_bytes > ENVELOPE_BYTES_PER_KIND:
                notes.append(f"{k.cached_bytes / 1e9:.1f} GB of {k.kind} objects (tested envelope: 1.5 GB)")
        return notes


ANCHOR_LABELS = {LABEL_INSTANCE_TYPE: "Standard_ND96asr_v4", LABEL_REGION: "eastus", LABEL_ZONE: "eastus-1"}
"""The labels the kubelet's cloud provider sets on every node (kubernetes.io well-known labels)."""


@dataclass(frozen=True)
class NodeShape:
    """One pool's nodes as the API server sees them."""

    name: str
    count: int
    labels: dict[str, str]
    taints: tuple[NodeTaint, ...]
    vcpus: int
    memory_gib: int
    gpus: int
    max_pods: int


def _kinds(nodes: int, pods: int, node_bytes: int, pod_bytes: int, lease_bytes: int, event_bytes: int,
           ) -> tuple[KindLoad, ...]:
    events = math.ceil(ENVELOPE_EVENTS * nodes / ENVELOPE_NODES)
    return (
        KindLoad("Node", nodes, node_bytes, COMPACTION_WINDOW_S / NODE_STATUS_S,
                 why="every VM the plan declares, API servers' kubelets included"),
        KindLoad("Lease", nodes, lease_bytes, COMPACTION_WINDOW_S / LEASE_RENEW_S,
                 why="one kube-node-lease heartbeat per node, renewed every 10 s"),
        KindLoad("Pod", pods, pod_bytes, 1, why="every node at its maxPods"),
        KindLoad("Event", events, event_bytes, 1, events_store=True,
                 why=f"{ENVELOPE_EVENTS:,} per {ENVELOPE_NODES:,} nodes (sig-scalability envelope), kept 1 h "
                     "(--event-ttl)"),
    )


def plan_api_load(shapes: tuple[NodeShape, ...], images: tuple[str, ...], provider_id: str) -> ApiLoad:
    """`shapes`: the pools (and the API servers' own nodes) with node counts; `images`: references as the
    cluster's registry serves them (what nodes report in status.images and pods run)."""
    nodes = sum(s.count for s in shapes)
    node_bytes = math.ceil(sum(s.count * json_size(node_object(
        f"{s.name}-000000", s.labels, s.taints, s.vcpus, s.memory_gib, s.gpus, s.max_pods, provider_id, images))
        for s in shapes) / nodes)
    image = max(images, key=len) if images else "registry/image:tag"
    gpus = max((s.gpus for s in shapes), default=0)
    pod_bytes = json_size(pod_object(f"{shapes[0].name}-000000", image, gpus))
    lease_bytes = json_size(lease_object(f"{shapes[0].name}-000000"))
    event_bytes = json_size(event_object(f"{shapes[0].name}-000000", image))
    pods = sum(s.count * s.max_pods for s in shapes)
    anchor_node = json_size(node_object("anchor-000000", ANCHOR_LABELS, (), 96, 900, 8, 110, provider_id, images))
    anchor = _kinds(ANCHOR_NODES, ANCHOR_PODS, anchor_node, json_size(pod_object("anchor-000000", image, 8)),
                    lease_bytes, event_bytes)
    serving = (ANCHOR_HEAP_BYTES - sum(k.cached_bytes for k in anchor)) / ANCHOR_NODES
    return ApiLoad(nodes, _kinds(nodes, pods, node_bytes, pod_bytes, lease_bytes, event_bytes), serving)


def etcd_file_bytes(db_bytes: float) -> float:
    """The most the database file reaches between defragmentations."""
    return db_bytes * FRAGMENTATION_ROOM


def etcd_quota(db_bytes: float) -> int:
    """The backend quota: the fragmented data with room for what the model does not count, rounded up to a
    power-of-two GiB, between etcd's default and its suggested maximum."""
    need = max(1, math.ceil(etcd_file_bytes(db_bytes) * UNCOUNTED_ROOM / GIB))
    return min(ETCD_MAX_QUOTA, max(ETCD_DEFAULT_QUOTA, 2 ** math.ceil(math.log2(need)) * GIB))
