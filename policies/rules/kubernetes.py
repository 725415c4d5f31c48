"""In-cluster rules: system components spread over zones, balloons priced below every workload."""

from __future__ import annotations

from typing import Any

from pulumi_policy import ReportViolation, ResourceValidationArgs, Severity, StackValidationArgs

from .declare import Config, resource_rule, stack_rule
from .props import ZONE_LABEL, get, items

DEPLOYMENT = "kubernetes:apps/v1:Deployment"
DAEMONSET = "kubernetes:apps/v1:DaemonSet"
CLUSTER_ROLE = "kubernetes:rbac.authorization.k8s.io/v1:ClusterRole"
CLUSTER_ROLE_BINDING = "kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding"
WATCH_REASON = "gpucluster.io/cluster-wide-watch-reason"
WATCHED = {"pods": ("",), "nodes": ("",), "secrets": ("",), "events": ("", "events.k8s.io"),
           "endpointslices": ("discovery.k8s.io",)}
"""Resources whose cluster-wide LIST/WATCH from every node scales with the cluster: resource -> API groups."""
BUILT_IN_WIDE = ("cluster-admin", "admin", "edit", "view")
"""Default ClusterRoles that grant list/watch on pods (kubernetes plugin/pkg/auth/authorizer/rbac/bootstrappolicy)."""
RELEASE = "kubernetes:helm.sh/v3:Release"
PRIORITY_CLASS = "kubernetes:scheduling.k8s.io/v1:PriorityClass"
BALLOON_LABEL = ("app.kubernetes.io/component", "balloon")
CUTOFF_FLAG = "--expendable-pods-priority-cutoff="
AUTOSCALER_DEFAULT_CUTOFF = -10  # cluster-autoscaler's own default for the flag
# Charts whose controllers are system components: chart name -> (values key of the Deployment, chart's default replicas).
SYSTEM_CHARTS = {"kueue": ("controllerManager", 1), "cilium": ("operator", 2)}
SPREAD_CONFIG = {
    "minReplicas": {"type": "integer", "default": 2, "minimum": 1},
    "systemPriorityClasses": {"type": "array", "items": {"type": "string"},
                              "default": ["gpucluster-system", "system-cluster-critical"]},
}


def _spread_problems(replicas: int, pod: Any, config: Config) -> list[str]:
    problems = []
    if replicas < int(config["minReplicas"]):
        problems.append(f"{replicas} replica(s); at least {config['minReplicas']} so a zone loss leaves one running")
    spread = any(get(c, "topologyKey") == ZONE_LABEL and get(c, "whenUnsatisfiable") == "DoNotSchedule"
                 for c in items(get(pod, "topologySpreadConstraints")))
    anti = any(get(t, "topologyKey") == ZONE_LABEL for t in items(
        get(pod, "affinity", "podAntiAffinity", "requiredDuringSchedulingIgnoredDuringExecution")))
    if not (spread or anti):
        problems.append(f"no required spread over {ZONE_LABEL} (a DoNotSchedule topologySpreadConstraint or a "
                        "required pod anti-affinity): the scheduler may put every replica in one zone")
    return problems


@resource_rule(
    "kubernetes-apps-deployment-system-zone-spread", types=(DEPLOYMENT,), severity=Severity.HIGH,
    description="Cluster system Deployments (CoreDNS, the autoscaler; those at a "
                "system priority class) run at least minReplicas replicas and are required to spread over zones.",
    remediation="Give the Deployment 2+ replicas and a topologySpreadConstraint on topology.kubernetes.io/zone with "
                "whenUnsatisfiable: DoNotSchedule (components.kubernetes.objects.common.on_system_nodes does both).",
    config=SPREAD_CONFIG)
def system_deployment_spread(args: ResourceValidationArgs, report: ReportViolation, config: Config) -> None:
    pod = get(args.props, "spec", "template", "spec", default={})
    if get(pod, "priorityClassName") not in list(config["systemPriorityClasses"]):
        return
    for problem in _spread_problems(int(get(args.props, "spec", "replicas", default=1)), pod, config):
        report(f"{get(args.props, 'metadata', 'name')}: {problem}", None)


@resource_rule(
    "kubernetes-helm-release-system-zone-spread", types=(RELEASE,), severity=Severity.HIGH,
    description="System components installed from charts (Kueue's controller manager, the Cilium operator) run at "
                "least minReplicas replicas spread over zones, set through the chart's values.",
    remediation="Set the chart's replicas and topologySpreadConstraints values (see components/kubernetes/objects).",
    config=SPREAD_CONFIG)
def system_release_spread(args: ResourceValidationArgs, report: ReportViolation, config: Config) -> None:
    chart = str(get(args.props, "chart", default="")).rstrip("/").rsplit("/", 1)[-1]
    if chart not in SYSTEM_CHARTS:
        return
    key, default_replicas = SYSTEM_CHARTS[chart]
    values = get(args.props, "values", key, default={})
    for problem in _spread_problems(int(get(values, "replicas", default=default_replicas)), values, config):
        report(f"chart {chart} ({key}): {problem}", None)


def _cutoff(resources: list) -> int:
    for resource in resources:
        if resource.resource_type != DEPLOYMENT:
            continue
        for container in items(get(resource.props, "spec", "template", "spec", "containers")):
            for arg in items(get(container, "args")) + items(get(container, "command")):
                if isinstance(arg, str) and arg.startswith(CUTOFF_FLAG):
                    return int(arg.removeprefix(CUTOFF_FLAG))
    return AUTOSCALER_DEFAULT_CUTOFF


@stack_rule(
    "kubernetes-scheduling-priorityclass-balloon-priority", severity=Severity.HIGH,
    description="Balloon pods' priority is not below the autoscaler's expendable cutoff (else the autoscaler ignores "
                "them and scales their nodes away), is below every workload class (so any real pod preempts them) "
                "and never preempts.",
    remediation="Keep the balloon class at the cutoff (-10) with preemptionPolicy: Never, and every workload class "
                "above it.")
def balloon_priority(args: StackValidationArgs, report: ReportViolation, _: Config) -> None:
    classes = {get(r.props, "metadata", "name"): r for r in args.resources if r.resource_type == PRIORITY_CLASS}
    cutoff = _cutoff(args.resources)
    balloons = [r for r in args.resources if r.resource_type == DEPLOYMENT
                and get(r.props, "metadata", "labels", BALLOON_LABEL[0]) == BALLOON_LABEL[1]]
    for balloon in balloons:
        name = get(balloon.props, "spec", "template", "spec", "priorityClassName")
        declared = classes.get(name)
        if declared is None:
            report(f"balloon uses priority class {name!r}, which the stack does not declare", balloon.urn)
            continue
        value = int(get(declared.props, "value", default=0))
        if value < cutoff:
            report(f"balloon class {name} ({value}) is below the autoscaler's expendable cutoff ({cutoff}): "
                   "the autoscaler ignores balloons and removes the warm nodes", balloon.urn)
        above = sorted((other, int(get(c.props, "value", default=0))) for other, c in classes.items() if other != name)
        not_above = [f"{other} ({v})" for other, v in above if v <= value]
        if not_above:
            report(f"balloon class {name} ({value}) is not below workload classes {', '.join(not_above)}: "
                   "their pods cannot preempt balloons", balloon.urn)
        if get(declared.props, "preemptionPolicy") != "Never":
            report(f"balloon class {name} may preempt: balloons must never evict real pods", declared.urn)


def _wide_grants(rules: list[Any]) -> list[str]:
    """`resource (verbs)` for every cluster-wide list/watch grant among a ClusterRole's rules."""
    found = []
    for rule in rules:
        verbs = {str(v) for v in items(get(rule, "verbs"))}
        if not verbs & {"list", "watch", "*"} or items(get(rule, "resourceNames")):
            continue
        groups = {str(g) for g in items(get(rule, "apiGroups"))}
        for resource in items(get(rule, "resources")):
            for name, wanted in WATCHED.items():
                if resource in (name, "*") and (groups & set(wanted) or "*" in groups):
                    found.append(f"{name} ({', '.join(sorted(verbs & {'list', 'watch', '*'}))})")
    return sorted(set(found))


def _bound(binding: Any, namespace: str, account: str) -> bool:
    for subject in items(get(binding, "subjects")):
        kind, name = get(subject, "kind"), get(subject, "name")
        if kind == "ServiceAccount" and name == account and get(subject, "namespace") == namespace:
            return True
        if kind == "Group" and name in ("system:serviceaccounts", f"system:serviceaccounts:{namespace}",
                                        "system:authenticated"):
            return True
    return False


@stack_rule(
    "kubernetes-apps-daemonset-cluster-wide-watch", severity=Severity.HIGH,
    description="A DaemonSet's service account is not granted cluster-wide list or watch (ClusterRoleBinding) on "
                "pods, nodes, endpointslices, secrets or events, unless the DaemonSet's "
                f"`{WATCH_REASON}` annotation says why: one such agent per node makes every change of those objects "
                "a message to every node (OpenAI's API servers reached 70 GB of heap at 7,500 nodes from Endpoints "
                "watches on every node).",
    remediation="Read the agent's own node by name (GET /api/v1/nodes/$NODE_NAME), list with a field selector on "
                "spec.nodeName, or move the cluster-wide read to one Deployment; if the agent truly needs it, say why "
                f"in the DaemonSet's {WATCH_REASON} annotation (its load then shows in the plan's node-agent table).")
def daemonset_cluster_wide_watch(args: StackValidationArgs, report: ReportViolation, _: Config) -> None:
    roles = {get(r.props, "metadata", "name"): r for r in args.resources if r.resource_type == CLUSTER_ROLE}
    bindings = [r for r in args.resources if r.resource_type == CLUSTER_ROLE_BINDING]
    for daemonset in (r for r in args.resources if r.resource_type == DAEMONSET):
        if str(get(daemonset.props, "metadata", "annotations", WATCH_REASON, default="")).strip():
            continue
        namespace = get(daemonset.props, "metadata", "namespace", default="default")
        account = get(daemonset.props, "spec", "template", "spec", "serviceAccountName", default="default")
        for binding in bindings:
            if not _bound(binding.props, namespace, account):
                continue
            role = get(binding.props, "roleRef", "name")
            if role in roles:
                grants = _wide_grants(items(get(roles[role].props, "rules")))
            elif role in BUILT_IN_WIDE:
                grants = [f"everything the built-in {role} role reads"]
            else:
                grants = [f"rules of ClusterRole {role}, which the stack does not declare (cannot be checked)"]
            if grants:
                report(f"DaemonSet {namespace}/{get(daemonset.props, 'metadata', 'name')}: service account {account} is "
                       f"granted cluster-wide {', '.join(grants)} through ClusterRoleBinding "
                       f"{get(binding.props, 'metadata', 'name')}", daemonset.urn)


RULES = [system_deployment_spread, system_release_spread, balloon_priority, daemonset_cluster_wide_watch]
