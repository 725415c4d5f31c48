"""What a node of a scale set looks like to Kubernetes and to the cluster autoscaler: labels, taints, tags."""

from __future__ import annotations

from gpucluster.catalog.in_cluster import RDMA_HCA_MAX, RDMA_RESOURCE
from gpucluster.planning.fence import FENCE
from gpucluster.planning.placement import PoolPlan, ScaleSetPlan
from gpucluster.planning.tags import machine_tags
from gpucluster.planning.taints import NodeTaint
from gpucluster.vocabulary import (
    AUTOSCALER_ENABLED_TAG,
    AUTOSCALER_GPUS_TAG,
    AUTOSCALER_LABEL_TAG_PREFIX,
    AUTOSCALER_MAX_TAG,
    AUTOSCALER_MIN_TAG,
    AUTOSCALER_NAME_TAG,
    AUTOSCALER_RESOURCE_TAG_PREFIX,
    AUTOSCALER_TAINT_TAG_PREFIX,
    COST_CENTRE_TAG,
    INFINIBAND_TAG,
    LABEL_ACCELERATOR,
    LABEL_ATTESTATION,
    LABEL_CC_MODE,
    LABEL_CONFIDENTIAL,
    LABEL_CONTROL_PLANE,
    LABEL_GPU_PRODUCT,
    LABEL_IB_DOMAIN,
    LABEL_INTERCONNECT_GROUP,
    LABEL_POOL,
    LABEL_RACK,
    LABEL_ROLE,
    LABEL_SCALE_SET,
    LABEL_ZONE,
    TAINT_PREFLIGHT,
    TEAM_TAG,
    autoscaler_tag_key,
)

CONFIDENTIAL_LABELS = {LABEL_CONFIDENTIAL: "true", LABEL_CC_MODE: "on", LABEL_ATTESTATION: "passed"}
"""Set at join, which the image's gate allows only once the GPU reports CC on and passes attestation
(components/bootstrap/confidential.py)."""
CONFIDENTIAL_TAINT = NodeTaint(LABEL_CONFIDENTIAL, "true", "NoSchedule")
PREFLIGHT_TAINT = NodeTaint(TAINT_PREFLIGHT, "pending", "NoSchedule")
"""Set at registration; the GPU health DaemonSet removes it once the node passes its checks."""
CONTROL_PLANE_TAINT = NodeTaint(LABEL_CONTROL_PLANE, "", "NoSchedule")
"""kubeadm's control-plane taint, which the API servers register with."""


def zone_label(location: str, zone: str) -> str:
    return f"{location}-{zone}"


def node_labels(pool: PoolPlan, scale_set: ScaleSetPlan, location: str) -> dict[str, str]:
    """Labels every node of the scale set registers with. Kueue's topology levels key on zone and domain."""
    labels = {
        LABEL_POOL: pool.name,
        LABEL_ROLE: pool.kind.value,
        LABEL_ZONE: zone_label(location, scale_set.zone),
        LABEL_IB_DOMAIN: scale_set.name if scale_set.infiniband else "none",
        LABEL_SCALE_SET: scale_set.name,
        FENCE.label: FENCE.open,
        **pool.spec.labels,
    }
    if scale_set.rack is not None:
        # Racks of one interconnect group share its InfiniBand fabric; NVLink spans one rack (docs/rack-scale.md).
        labels[LABEL_IB_DOMAIN] = scale_set.rack.group
        labels[LABEL_INTERCONNECT_GROUP] = scale_set.rack.group
        labels[LABEL_RACK] = scale_set.name
    if pool.size.gpu_model:
        labels[LABEL_GPU_PRODUCT] = pool.size.gpu_model
        labels[LABEL_ACCELERATOR] = "nvidia"
    if pool.confidential is not None:
        # Set at join, which happens only once the GPU reports CC on and passes attestation.
        labels.update(CONFIDENTIAL_LABELS)
    return labels


def registers_preflight(pool: PoolPlan) -> bool:
    """GPU pools register with the preflight taint: their health DaemonSet removes it once the GPUs pass
    (components/kubernetes/objects/health.py). Other pools have nothing that would remove it."""
    return pool.size.gpus > 0


def node_taints(pool: PoolPlan) -> tuple[NodeTaint, ...]:
    """The pool's own taints; confidential pools also carry the confidential taint, so only pods
    that tolerate it (and so ask for confidential GPUs) land there."""
    taints = tuple(NodeTaint(t.key, t.value, t.effect) for t in pool.spec.taints)
    if pool.confidential is not None and all(t.key != CONFIDENTIAL_TAINT.key for t in taints):
        taints += (CONFIDENTIAL_TAINT,)
    return taints


def registered_taints(pool: PoolPlan) -> tuple[NodeTaint, ...]:
    """What a node of the pool registers with (kubelet `registerWithTaints`): the preflight taint first where
    the pool's health checks remove it, then the pool's own."""
    return (*((PREFLIGHT_TAINT,) if registers_preflight(pool) else ()), *node_taints(pool))


def split_min(pool: PoolPlan) -> list[int]:
    """The pool's autoscaler minimum spread over its scale sets like their capacity."""
    total, sets = pool.spec.min_count, len(pool.scale_sets)
    base, extra = divmod(total, sets)
    return [min(s.capacity, base + (1 if i < extra else 0)) for i, s in enumerate(pool.scale_sets)]


def autoscaler_tags(cluster: str, pool: PoolPlan, scale_set: ScaleSetPlan, minimum: int,
                    location: str) -> dict[str, str]:
    """Tags the autoscaler's VMSS auto-discovery and scale-from-zero templates read."""
    tags = {
        AUTOSCALER_ENABLED_TAG: "true",
        AUTOSCALER_NAME_TAG: cluster,
        AUTOSCALER_MIN_TAG: str(minimum),
        AUTOSCALER_MAX_TAG: str(scale_set.capacity),
    }
    for key, value in node_labels(pool, scale_set, location).items():
        tags[AUTOSCALER_LABEL_TAG_PREFIX + autoscaler_tag_key(key)] = value
    for taint in node_taints(pool):
        tags[AUTOSCALER_TAINT_TAG_PREFIX + autoscaler_tag_key(taint.key)] = f"{taint.value}:{taint.effect}"
    if pool.size.gpus:
        tags[AUTOSCALER_GPUS_TAG] = str(pool.size.gpus)
    if uses_shared_rdma(pool):
        # The RDMA device plugin's resource (objects/rdma.py): a scale set at zero has no node to show it, and a
        # pod asking for it would fit no template (cluster-autoscaler azure_template.go reads `_` as `/`).
        tags[AUTOSCALER_RESOURCE_TAG_PREFIX + RDMA_RESOURCE.replace("/", "_")] = str(RDMA_HCA_MAX)
    return tags


def uses_shared_rdma(pool: PoolPlan) -> bool:
    """InfiniBand pools share their HCAs through the RDMA shared device plugin (objects/rdma.py); NVLink rack pools
    do not: their InfiniBand VFs are RDMA-only, handed to pods by DRANET (docs/rack-scale.md)."""
    return bool(pool.infiniband) and pool.racks is None


def scale_set_tags(cluster: str, pool: PoolPlan, scale_set: ScaleSetPlan, minimum: int,
                   location: str) -> dict[str, str]:
    """Every tag a pool's scale set carries: cost and policy tags, then what the autoscaler reads."""
    spec = pool.spec
    return {
        **machine_tags(cluster, spec.kind.value, spec.name, {}),
        **({TEAM_TAG: spec.team} if spec.team else {}),
        **({COST_CENTRE_TAG: spec.cost_centre} if spec.cost_centre else {}),
        INFINIBAND_TAG: "true" if scale_set.infiniband else "false",
        **autoscaler_tags(cluster, pool, scale_set, minimum, location),
    }
