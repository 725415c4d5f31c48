"""The agents that run on every node: the DaemonSets the layer renders and the charts' (a sourced table), with
the nodes each runs on and its steady API load, for the APF objects and the plan's load check."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpucluster.catalog.flowcontrol import CHART_AGENTS, RACK_CHART_AGENTS
from gpucluster.kubernetes.objects.common import Object
from gpucluster.kubernetes.objects.flowcontrol import calls_api
from gpucluster.kubernetes.objects.layer import layer_objects
from gpucluster.planning.agent_load import AgentLoad
from gpucluster.vocabulary import ANNOTATION_API_CALLS

if TYPE_CHECKING:
    from gpucluster.planning.cluster_plan import ClusterPlan


def layer_daemonsets(plan: ClusterPlan) -> list[Object]:
    """Every DaemonSet the layer itself renders, as the components declare it."""
    return [o for o in layer_objects(plan) if o["kind"] == "DaemonSet"]


def _nodes_placed(plan: ClusterPlan, name: str, placements: dict[str, tuple[str, ...]]) -> int:
    """Nodes of the pools the bring-up simulation placed the DaemonSet on (its selector, affinity and
    tolerations read from the object; the API servers' pool counts its members)."""
    nodes = {p.name: p.nodes for p in plan.pools} | {"apiservers": plan.control_plane.api.count}
    return sum(nodes.get(pool, 0) for pool in placements.get(name, ()))


def node_agent_loads(plan: ClusterPlan, placements: dict[str, tuple[str, ...]]) -> tuple[AgentLoad, ...]:
    """Each per-node agent's calls: the layer's own from their annotation (none without a token), the charts' from
    the sourced table. `placements`: the bring-up simulation's pools per workload."""
    every_node = plan.nodes + plan.spec.control_plane.api_servers.count
    gpu_nodes = sum(p.nodes for p in plan.pools if p.size.gpus)
    own = []
    for ds in layer_daemonsets(plan):
        pod = ds["spec"]["template"]["spec"]
        rate = (ds["metadata"].get("annotations") or {}).get(ANNOTATION_API_CALLS)
        source = f"its {ANNOTATION_API_CALLS} annotation" if rate is not None else "not declared"
        if not calls_api(pod):
            rate, source = "0", "no service-account token (automountServiceAccountToken: false)"
        own.append(AgentLoad(ds["metadata"]["name"], ds["metadata"]["namespace"],
                             pod.get("serviceAccountName") or "default",
                             _nodes_placed(plan, ds["metadata"]["name"], placements),
                             None if rate is None else float(rate), source))
    rack_nodes = sum(p.nodes for p in plan.pools if p.racks is not None)
    charts = [AgentLoad(a.daemonset, a.namespace, a.service_account,
                        rack_nodes if a.rack_nodes_only else gpu_nodes if a.gpu_nodes_only else every_node,
                        a.calls_per_minute, a.source) for a in CHART_AGENTS + RACK_CHART_AGENTS
              if plan.spec.in_cluster.enabled and (gpu_nodes or not a.gpu_nodes_only)
              and (rack_nodes or not a.rack_nodes_only)]
    return tuple(own + charts)


def has_rack_pools(plan: ClusterPlan) -> bool:
    """The rack charts (and their agents) are installed (components/kubernetes/rack_devices.py)."""
    return any(p.racks is not None for p in plan.pools)
