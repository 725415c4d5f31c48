"""Every plan of a stack, computed once from the spec. Components and the report read only this."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import date
from typing import TypeVar

from gpucluster.catalog.prices import price_catalogue, rates_of_price_file
from gpucluster.errors import Problem, SpecError
from gpucluster.planning.agent_load import AgentLoadPlan
from gpucluster.planning.api_sizing import ApiLoad, NodeShape, plan_api_load
from gpucluster.planning.azure_names import resource_group_name
from gpucluster.planning.balloons import BalloonPlan, plan_balloons
from gpucluster.planning.boot_plan import BootPlan, plan_boot
from gpucluster.planning.bootstrap_tokens import TokenSchedule, plan_bootstrap_tokens
from gpucluster.planning.bring_up import BringUp
from gpucluster.planning.clock import today as clock_today
from gpucluster.planning.cni_update import CniUpdatePlan, plan_cni_update
from gpucluster.planning.control_plane import ControlPlanePlan, plan_control_plane
from gpucluster.planning.cost import CostPlan, plan_cost, spot_problems
from gpucluster.planning.deploy_runner import DeployRunnerPlan, plan_deploy_runner
from gpucluster.planning.egress import EgressPlan, plan_egress
from gpucluster.planning.first_up import FirstUpPlan, plan_first_up
from gpucluster.planning.ip_plan import IpPlan, plan_ip
from gpucluster.planning.limits import Limits, effective_limits
from gpucluster.planning.metrics import MetricsPlan, metrics_problems, plan_metrics
from gpucluster.planning.node_images import NodeImagesPlan, plan_node_images
from gpucluster.planning.node_template import CONTROL_PLANE_TAINT, node_labels, node_taints
from gpucluster.planning.placement import PoolPlan, plan_pools
from gpucluster.planning.pod_addresses import prefix_mode
from gpucluster.planning.quota import CountNeed, QuotaNeed, count_problems, plan_counts, plan_quota, quota_problems
from gpucluster.planning.registry import RegistryPlan, cluster_upstream_images, plan_registry
from gpucluster.planning.rollout import RolloutPlan, plan_rollout
from gpucluster.planning.scheduling import SchedulingPlan, plan_scheduling
from gpucluster.planning.tag_limits import tag_count_problems
from gpucluster.planning.versions import VersionPlan, plan_versions
from gpucluster.project import project_root
from gpucluster.spec import ClusterSpec, PoolKind
from gpucluster.spec.cost import read_price_file
from gpucluster.vocabulary import LABEL_CONTROL_PLANE, LABEL_EXCLUDE_FROM_LB

T = TypeVar("T")


@dataclass(frozen=True)
class ClusterPlan:
    spec: ClusterSpec
    limits: Limits
    ip: IpPlan
    egress: EgressPlan
    pools: tuple[PoolPlan, ...]
    control_plane: ControlPlanePlan
    quota: tuple[QuotaNeed, ...]
    scheduling: SchedulingPlan
    balloons: tuple[BalloonPlan, ...]
    versions: VersionPlan
    registry: RegistryPlan
    """The cluster's container registry: every image reference is served through it."""
    images: NodeImagesPlan
    tokens: TokenSchedule
    """The bootstrap tokens' schedule as of the plan's date (components/planning/clock.py)."""
    boot: BootPlan
    """What every machine boots with (components/bootstrap/ renders it)."""
    first_up: FirstUpPlan
    """Where `pulumi up` reaches the API server from and its readiness wait (the bootstrap tokens and the
    in-cluster layer are applied through it)."""
    cost: CostPlan
    """What the cluster costs at the catalogue's (and the stack's price file's) prices (docs/cost.md)."""
    metrics: MetricsPlan
    """The telemetry budget: raw series at the edge, what the workspace receives, its limits (docs/metrics.md)."""
    rollout: RolloutPlan
    """The order in which every machine is re-imaged after a change to what it boots (planning/rollout.py)."""
    bring_up: BringUp | None = None
    """The simulated bring-up of the in-cluster layer, set when components/simulation/check.py makes the plan a
    `CheckedPlan` (None when the layer is off or the plan is not checked)."""
    counts: tuple[CountNeed, ...] = ()
    """Per-subscription counts beside vCPUs: public IPs, prefixes, NAT gateways, scale sets, NICs."""
    agent_load: AgentLoadPlan | None = None
    """The node agents' API load against their APF level's seats, set with `bring_up`."""
    deploy_runner: DeployRunnerPlan | None = None
    """The VM in the VNet that step 2 of the first `pulumi up` runs on, where the stack has one (planning/deploy_runner.py)."""

    @property
    def nodes(self) -> int:
        return sum(p.nodes for p in self.pools)

    @property
    def cni_update(self) -> CniUpdatePlan:
        """The Cilium agent's rollout width over every node it runs on: the pools' and the API servers'."""
        return plan_cni_update(self.spec.in_cluster.cni_update, self.nodes + self.control_plane.api.count)

    @property
    def prefix_mode(self) -> bool:
        """Pods take /28 blocks on the NICs (every pool alike: the IP plan refuses a mix)."""
        return prefix_mode(self.spec)

    @property
    def gpus(self) -> int:
        return sum(p.gpus for p in self.pools)

    @property
    def system_nodes(self) -> int:
        """Nodes that run cluster add-ons (one replica per node for those with hostname anti-affinity)."""
        return sum(p.nodes for p in self.pools if p.kind is PoolKind.SYSTEM)


def _attempt(planner: Callable[[], T], problems: list[Problem]) -> T | None:
    try:
        return planner()
    except SpecError as error:
        problems.extend(error.problems)
        return None


KUBELET_DEFAULT_MAX_PODS = 110
"""The API servers' kubelets keep kubelet's default maxPods (k8s.io/kubelet config/v1beta1 types.go MaxPods)."""


def api_load(spec: ClusterSpec, pools: tuple[PoolPlan, ...], registry: RegistryPlan) -> ApiLoad:
    """Each pool's nodes as they register (labels and taints of its first scale set), the API servers' own
    kubelets shaped as kubeadm registers a control-plane node, and the images the cluster's registry serves."""
    shapes = [NodeShape(p.name, p.nodes, node_labels(p, p.scale_sets[0], spec.location), node_taints(p),
                        p.size.vcpus, p.size.memory_gib, p.size.gpus, p.spec.pods_per_node) for p in pools]
    # The API servers' capacity is the largest pool's as an estimate (their size is picked from this very load);
    # the capacity fields are a few bytes of a node object either way.
    largest = max(pools, key=lambda p: p.size.memory_gib, default=None)
    shapes.append(NodeShape("apiserver", spec.control_plane.api_servers.count,
                            {LABEL_CONTROL_PLANE: "", LABEL_EXCLUDE_FROM_LB: ""},
                            (CONTROL_PLANE_TAINT,),
                            largest.size.vcpus if largest else 0, largest.size.memory_gib if largest else 0, 0, 0))
    # The providerID the cloud provider sets, at the length of the real one (the API servers' scale set).
    provider = (f"azure:///subscriptions/{'0' * 8}-0000-0000-0000-{'0' * 12}/resourceGroups/"
                f"{resource_group_name(spec.name)}/providers/Microsoft.Compute/virtualMachineScaleSets/"
                "apiserver/virtualMachines/0")
    images = tuple(registry.serve(i) for i in cluster_upstream_images(spec))
    return plan_api_load(tuple(shapes), images, provider)


def plan_cluster(spec: ClusterSpec, today: date | None = None) -> ClusterPlan:
    """Run every planner; problems from independent planners are reported together. `today` (default: the
    clock) places the bootstrap tokens in their rotation period. The checks against the in-cluster layer come
    after, above the layer (components/simulation/check.py `plan_checked`)."""
    limits = effective_limits(spec)
    problems: list[Problem] = []
    ip = _attempt(lambda: plan_ip(spec, limits), problems)
    egress = _attempt(lambda: plan_egress(spec, limits), problems)
    pools = _attempt(lambda: plan_pools(spec, limits), problems)
    scheduling = _attempt(lambda: plan_scheduling(spec, pools), problems) if pools is not None else None
    balloons = _attempt(lambda: plan_balloons(spec, pools), problems) if pools is not None else None
    versions = _attempt(lambda: plan_versions(spec), problems)
    registry = _attempt(lambda: plan_registry(spec, cluster_upstream_images(spec)), problems)
    control_plane = (_attempt(lambda: plan_control_plane(spec, api_load(spec, pools, registry)), problems)
                     if pools is not None and registry is not None else None)
    images = (_attempt(lambda: plan_node_images(spec, pools, control_plane), problems)
              if pools is not None and control_plane is not None else None)
    # The stack declares the bootstrap tokens through the API servers, in-cluster layer or not.
    first_up = _attempt(lambda: plan_first_up(spec, ip.api_server_endpoint), problems) if ip is not None else None
    runner = _attempt(lambda: plan_deploy_runner(spec), problems)
    if pools is not None:
        problems.extend(tag_count_problems(spec, pools))
        problems.extend(spot_problems(pools))
    if (ip is None or egress is None or pools is None or control_plane is None or scheduling is None
            or balloons is None or versions is None or registry is None or images is None
            or first_up is None or problems):
        raise SpecError(problems)
    metrics = plan_metrics(spec, pools, control_plane)
    if over := metrics_problems(metrics):
        raise SpecError(over)
    extra = control_plane.vcpus_by_family()
    if runner is not None:
        extra[runner.size.quota_family] = extra.get(runner.size.quota_family, 0) + runner.size.vcpus
    quota = plan_quota(pools, extra, spec.vcpu_quota)
    counts = plan_counts(pools, control_plane, egress, spec.resource_quota, extra_nics=1 if runner else 0)
    if shortfall := quota_problems(quota, spec.location) + count_problems(counts, spec.location):
        raise SpecError(shortfall)
    day = today or clock_today()
    tokens = plan_bootstrap_tokens(spec.access.bootstrap_token, day)
    catalogue = price_catalogue()
    if spec.cost.price_file:
        prices = read_price_file(spec.cost.price_file, project_root())
        catalogue = catalogue.overlaid(rates_of_price_file(prices, spec.cost.price_file))
    cost = plan_cost(spec, pools, control_plane, egress, balloons, scheduling, catalogue, day, spec.cost.price_file,
                     runner, metrics)
    plan = ClusterPlan(spec, limits, ip, egress, pools, control_plane, quota, scheduling, balloons, versions,
                       registry, images, tokens, plan_boot(spec, ip, pools, control_plane), first_up=first_up,
                       counts=counts, cost=cost, metrics=metrics,
                       rollout=plan_rollout(pools, control_plane, scheduling, spec.rollout), deploy_runner=runner)
    return plan
