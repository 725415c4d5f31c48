"""Nodes: Ready with pod addresses, every pool at its minimum, InfiniBand seen from a pod on InfiniBand nodes, and
confidential nodes attested on the kernel flavour their driver modules are built for.

Nodes are grouped by the scale set their `spec.providerID` names, parsed by the prefix IPAM controller's own
`instance_of_node` (the way Cilium and the cluster autoscaler map nodes to VMs).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from gpucluster.agents.prefix_ipam import instance_of_node
from gpucluster.catalog.node_images import NVIDIA_BRANCH
from gpucluster.planning.azure_names import resource_group_name
from gpucluster.planning.cluster_plan import ClusterPlan
from gpucluster.planning.node_template import CONFIDENTIAL_LABELS
from gpucluster.verify import expected
from gpucluster.verify.kube import Kube
from gpucluster.verify.results import Check, Result
from gpucluster.vocabulary import LABEL_IB_DOMAIN, LABEL_NFD_RDMA_AVAILABLE, LABEL_NFD_RDMA_CAPABLE

NODES = Check("cluster.nodes", "kubelet's Ready condition; pod addresses from CiliumNode spec.ipam.pool (Cilium "
                               "ipam crd and azure modes; docs/ip-plan.md) or the node's spec.podCIDRs; pools' "
                               "minCount (cluster.pools[].minCount, the autoscaler's min tags)")
INFINIBAND = Check("cluster.infiniband", "node-feature-discovery v0.18.3 (gpu-operator v26.3.3's NFD chart 0.18.3) "
                                         "source/custom/static_features.go: its worker pod labels "
                                         f"{LABEL_NFD_RDMA_CAPABLE} (a Mellanox PCI device, vendor 15b3) "
                                         "and rdma.available (ib_uverbs and rdma_ucm loaded)")
CONFIDENTIAL = Check("cluster.confidential", "components/bootstrap/confidential.py: the join gate sets "
                                             f"{', '.join(f'{k}={v}' for k, v in CONFIDENTIAL_LABELS.items())} only "
                                             f"after attestation passes; the confidential image carries "
                                             f"linux-modules-nvidia-{NVIDIA_BRANCH}-server-open-azure-fde "
                                             "(images/confidential/bake.sh), "
                                             "built for the -azure-fde kernel")
RDMA_LABELS = (LABEL_NFD_RDMA_CAPABLE, LABEL_NFD_RDMA_AVAILABLE)
FDE_KERNEL_SUFFIX = "-azure-fde"
SHOWN = 8


@dataclass
class Group:
    """The nodes of one pool (or the API servers), with what is wrong with each."""

    name: str
    minimum: int = 0
    nodes: list[dict[str, Any]] = field(default_factory=list)


def _ready(node: dict[str, Any]) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (node.get("status") or {}).get("conditions") or [])


def _pod_addresses(node: dict[str, Any], cilium: dict[str, Any] | None) -> int:
    pool = (((cilium or {}).get("spec") or {}).get("ipam") or {}).get("pool") or {}
    return len(pool) or len((node.get("spec") or {}).get("podCIDRs") or [])


def _name(node: dict[str, Any]) -> str:
    return str(node.get("metadata", {}).get("name"))


def _labels(node: dict[str, Any]) -> dict[str, str]:
    return node.get("metadata", {}).get("labels") or {}


def _listed(problems: list[str]) -> str:
    return "; ".join(problems[:SHOWN]) + (f" (+{len(problems) - SHOWN} more)" if len(problems) > SHOWN else "")


def group_nodes(plan: ClusterPlan, nodes: Iterable[dict[str, Any]]) -> tuple[dict[str, Group], list[str]]:
    """Pools (and the API servers) -> their nodes; nodes of no scale set of this stack, as problems."""
    groups = {pool.name: Group(f"pool {pool.name}", pool.spec.min_count) for pool in plan.pools}
    groups[expected.API_SCALE_SET] = Group("API servers", plan.control_plane.api.count)  # each registers as a node
    pool_of = {s.name.lower(): pool.name for pool, s in expected.scale_sets(plan)}
    pool_of[expected.API_SCALE_SET] = expected.API_SCALE_SET
    rg = resource_group_name(plan.spec.name)
    strangers = []
    for node in nodes:
        where = instance_of_node(node)
        if where is None:
            strangers.append(f"{_name(node)}: no scale-set providerID ({node.get('spec', {}).get('providerID')!r})")
        elif where[1].lower() != rg.lower():
            strangers.append(f"{_name(node)}: in resource group {where[1]}, not this stack's {rg}")
        elif where[2].lower() not in pool_of:
            strangers.append(f"{_name(node)}: scale set {where[2]} is not in the plan")
        else:
            groups[pool_of[where[2].lower()]].nodes.append(node)
    return groups, strangers


def check_nodes(kube: Kube, plan: ClusterPlan) -> list[Result]:
    nodes = kube.list("/api/v1/nodes")
    cilium = {_name(n): n for n in kube.list("/apis/cilium.io/v2/ciliumnodes", optional=True)}
    groups, strangers = group_nodes(plan, nodes)
    results = []
    if not nodes:
        results.append(NODES.failed("cluster", "the API server lists no node at all; the plan expects "
                                    f"{plan.control_plane.api.count} API server(s) and "
                                    f"{sum(p.spec.min_count for p in plan.pools)} pool node(s) at least",
                                    "is the kubeconfig this stack's, and did the API servers boot? (docs/operations.md, "
                                    "'Verifying a first boot')"))
    if strangers:
        results.append(NODES.failed("nodes of other clusters", _listed(strangers),
                                    "is the kubeconfig this stack's? (pulumi stack output adminKubeconfig); a node "
                                    "needs spec.providerID (docs/operations.md, 'Verifying a first boot')"))
    for group in groups.values():
        problems = []
        for node in group.nodes:
            if not _ready(node):
                problems.append(f"{_name(node)}: not Ready")
            if not _pod_addresses(node, cilium.get(_name(node))):
                problems.append(f"{_name(node)}: no pod addresses (CiliumNode spec.ipam.pool and spec.podCIDRs "
                                "empty)")
        ready = sum(1 for n in group.nodes if _ready(n))
        if ready < group.minimum:
            problems.append(f"{ready} Ready node(s), the pool's minimum is {group.minimum}")
        if problems:
            results.append(NODES.failed(group.name, _listed(problems),
                                        "a node not Ready: journalctl -u kubelet and -u gpucluster-node-boot on it; no "
                                        "pod addresses: the Cilium operator (azure IPAM) or the prefix IPAM controller "
                                        "(kubectl -n kube-system logs deploy/gpucluster-prefix-ipam) and the azure.nics "
                                        "check; below the minimum: the cluster autoscaler's logs and the scale sets' "
                                        "instances (docs/operations.md)"))
        elif group.nodes or group.minimum:
            results.append(NODES.passed(group.name, f"{len(group.nodes)} node(s), all Ready with pod addresses"))
        else:
            results.append(NODES.skipped(group.name, "no node yet (the pool's minimum is 0)"))
    return results + _infiniband(plan, groups) + _confidential(plan, groups)


def _infiniband(plan: ClusterPlan, groups: dict[str, Group]) -> list[Result]:
    results = []
    for pool in (p for p in plan.pools if p.infiniband):
        nodes = [n for n in groups[pool.name].nodes if _labels(n).get(LABEL_IB_DOMAIN, "none") != "none"]
        if not nodes:
            results.append(INFINIBAND.skipped(f"pool {pool.name}", "no InfiniBand node yet"))
            continue
        missing = [f"{_name(n)}: no {', '.join(k.rsplit('/', 1)[1] for k in RDMA_LABELS if _labels(n).get(k) != 'true')}"
                   for n in nodes if any(_labels(n).get(k) != "true" for k in RDMA_LABELS)]
        if missing:
            results.append(INFINIBAND.failed(f"pool {pool.name}", _listed(missing),
                                             "on the node: ibstat (ports Active), lsmod | grep -e ib_uverbs -e rdma_ucm "
                                             "(the Ubuntu-HPC image loads them); then the logs of the node-feature-"
                                             "discovery worker pod on that node (namespace gpu-operator)"))
        else:
            results.append(INFINIBAND.passed(f"pool {pool.name}", f"{len(nodes)} node(s): RDMA devices and verbs "
                                                                  "modules seen from the NFD worker pod"))
    return results or [INFINIBAND.skipped("every pool", "no InfiniBand pool in the plan")]


def _confidential(plan: ClusterPlan, groups: dict[str, Group]) -> list[Result]:
    results = []
    for pool in (p for p in plan.pools if p.confidential is not None):
        nodes = groups[pool.name].nodes
        if not nodes:
            results.append(CONFIDENTIAL.skipped(f"pool {pool.name}", "no confidential node yet"))
            continue
        problems = []
        for node in nodes:
            wrong = [f"{k}={_labels(node).get(k)}" for k, v in CONFIDENTIAL_LABELS.items() if _labels(node).get(k) != v]
            kernel = str((node.get("status") or {}).get("nodeInfo", {}).get("kernelVersion", ""))
            if wrong:
                problems.append(f"{_name(node)}: {', '.join(wrong)}")
            if not kernel.endswith(FDE_KERNEL_SUFFIX):
                problems.append(f"{_name(node)}: kernel {kernel or '?'} is not an {FDE_KERNEL_SUFFIX} kernel")
        if problems:
            results.append(CONFIDENTIAL.failed(f"pool {pool.name}", _listed(problems),
                                               "journalctl -t gpucluster-cc and /var/log/gpucluster/gpu-attestation.log "
                                               "on the node; uname -r must end in -azure-fde for the driver's "
                                               "modules (docs/confidential.md)"))
        else:
            results.append(CONFIDENTIAL.passed(f"pool {pool.name}", f"{len(nodes)} node(s) attested, CC on, "
                                                                    f"{FDE_KERNEL_SUFFIX} kernel"))
    return results or [CONFIDENTIAL.skipped("every pool", "no confidential pool in the plan")]
