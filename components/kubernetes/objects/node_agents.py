"""The agents that run on every node: the DaemonSets the layer renders and the charts' (a sourced table), with
the nodes each runs on and its steady API load, for the APF objects and the plan's load check."""

from __future__ import annotations

from typing import TYPE_CHECKING

from components.catalog.flowcontrol import CHART_AGENTS
from components.kubernetes.objects.common import Object
from components.kubernetes.objects.health import ANNOTATION_API_CALLS, health_objects
from components.kubernetes.objects.nodelocaldns import node_local_dns_objects
from components.planning.agent_load import AgentLoad
from components.planning.node_template import node_labels

if TYPE_CHECKING:
    from components.planning.cluster_plan import ClusterPlan


def layer_daemonsets(plan: ClusterPlan) -> list[Object]:
    """Every DaemonSet the layer itself renders (before the registry rewrites images: only accounts and
    selectors are read here)."""
    objects = [*health_objects(plan.pools, plan.registry.agents_image),
               *node_local_dns_objects(str(plan.ip.dns_service_ip))]
    return [o for o in objects if o["kind"] == "DaemonSet"]


def _nodes_selected(plan: ClusterPlan, daemonset: Object) -> int:
    """Nodes whose pool's labels match the DaemonSet's nodeSelector (every pool when it has none); a DaemonSet
    that tolerates every taint runs on the API servers' nodes too."""
    pod = daemonset["spec"]["template"]["spec"]
    selector = pod.get("nodeSelector") or {}
    everywhere = not selector and any(t.get("operator") == "Exists" and not t.get("key") for t in pod.get(
        "tolerations") or [])
    return (plan.spec.control_plane.api_servers.count if everywhere else 0) + sum(p.nodes for p in plan.pools
               if all(node_labels(p, p.scale_sets[0], plan.spec.location).get(k) == v for k, v in selector.items()))


def node_agent_loads(plan: ClusterPlan) -> tuple[AgentLoad, ...]:
    every_node = plan.nodes + plan.spec.control_plane.api_servers.count
    gpu_nodes = sum(p.nodes for p in plan.pools if p.size.gpus)
    own = []
    for ds in layer_daemonsets(plan):
        rate = (ds["metadata"].get("annotations") or {}).get(ANNOTATION_API_CALLS)
        own.append(AgentLoad(ds["metadata"]["name"], ds["metadata"]["namespace"],
                             ds["spec"]["template"]["spec"].get("serviceAccountName") or "default",
                             _nodes_selected(plan, ds), None if rate is None else float(rate),
                             f"its {ANNOTATION_API_CALLS} annotation" if rate is not None else "not declared"))
    charts = [AgentLoad(a.daemonset, a.namespace, a.service_account, gpu_nodes if a.gpu_nodes_only else every_node,
                        a.calls_per_minute, a.source) for a in CHART_AGENTS
              if plan.spec.in_cluster.enabled and (gpu_nodes or not a.gpu_nodes_only)]
    return tuple(own + charts)
