"""API Priority and Fairness (flowcontrol.apiserver.k8s.io/v1): node agents get a small share of their own, and
an admin group reaches the API servers through the exempt level.

Kubernetes puts a DaemonSet's service account in `workload-low` (or `workload-high` in kube-system) beside the
controllers (components/catalog/flowcontrol.py): an agent on every node whose requests grow with the cluster
then takes the seats the controllers need. Here every DaemonSet's service account (read from the DaemonSets the
layer renders, and the charts' agents) is routed to `gpucluster-node-agents`, a level with its own small share
that may not borrow: a runaway agent waits in its queues or gets 429s, and the rest of the cluster keeps its
seats. Kubelets stay where Kubernetes puts them: the `system:nodes` group matches `system-node-high` (400) and
`system-nodes` (500) before this schema (600), and a schema matches service accounts only, never that group.

`gpucluster-breakglass` maps the break-glass group to the mandatory `exempt` level (no queueing, no limit;
only the level named `exempt` may be of type Exempt: kubernetes pkg/apis/flowcontrol/validation/validation.go
ValidatePriorityLevelConfigurationSpec), so an operator can still delete a runaway DaemonSet while everything
else is throttled. The group's RBAC is a ClusterRoleBinding to `cluster-admin`, which can be removed, unlike
`system:masters`.
"""

from __future__ import annotations

from typing import Any

from gpucluster.catalog.flowcontrol import CHART_AGENTS, RACK_CHART_AGENTS
from gpucluster.kubernetes.objects.common import Object, obj
from gpucluster.planning.pki import BREAK_GLASS_GROUP

API = "flowcontrol.apiserver.k8s.io/v1"
NODE_AGENTS = "gpucluster-node-agents"
NODE_AGENTS_SHARES = 20
"""nominalConcurrencyShares: beside the built-in 245 (components/catalog/flowcontrol.py DEFAULT_SHARES), about 8%
of each API server's seats; the plan checks the agents' load against them (components/planning/agent_load.py)."""
NODE_AGENTS_LENDABLE = 50
NODE_AGENTS_PRECEDENCE = 600
"""After the kubelets' `system-node-high` (400) and `system-nodes` (500), before `kube-controller-manager`
(800) and `kube-system-service-accounts` (900), which would otherwise take a kube-system agent."""
QUEUING = {"queues": 64, "handSize": 6, "queueLengthLimit": 50}
"""As the built-in `system` level: 64 queues, hands of 6 (shuffle sharding keeps one flow from filling them),
50 requests a queue."""
BREAKGLASS = "gpucluster-breakglass"
BREAKGLASS_GROUP = BREAK_GLASS_GROUP
BREAKGLASS_PRECEDENCE = 2
"""Right after the mandatory `exempt` (1, which only that schema may use); `probes` shares 2 but matches only
the health endpoints."""


def _everything() -> dict[str, Any]:
    return {"resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"], "namespaces": ["*"],
                               "clusterScope": True}],
            "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}]}


def calls_api(pod: dict[str, object]) -> bool:
    """Whether its containers hold a service-account token: not when `automountServiceAccountToken: false` and no
    volume projects one (kubelet mounts the token only then; k8s.io/api core/v1 PodSpec)."""
    projected = any("serviceAccountToken" in source for v in pod.get("volumes") or []  # type: ignore[union-attr]
                    for source in (v.get("projected") or {}).get("sources") or [])
    return pod.get("automountServiceAccountToken") is not False or projected


def daemonset_accounts(objects: list[Object]) -> list[tuple[str, str]]:
    """(namespace, service account) of every DaemonSet among `objects` whose pods hold a token (the pod's `default`
    account when unset)."""
    found = []
    for o in objects:
        if o["kind"] == "DaemonSet":
            pod = o["spec"]["template"]["spec"]
            if calls_api(pod):
                found.append((o["metadata"]["namespace"], pod.get("serviceAccountName") or "default"))
    return found


def node_agent_accounts(own: list[Object], racks: bool = False) -> list[tuple[str, str]]:
    """The layer's own DaemonSets' accounts and the charts' agents' (the rack charts' where the cluster has rack
    pools), each once, sorted."""
    charts = CHART_AGENTS + (RACK_CHART_AGENTS if racks else ())
    accounts = daemonset_accounts(own) + [(a.namespace, a.service_account) for a in charts]
    return sorted(set(accounts))


def flowcontrol_objects(accounts: list[tuple[str, str]]) -> list[Object]:
    level = obj(API, "PriorityLevelConfiguration", NODE_AGENTS, spec={
        "type": "Limited",
        "limited": {"nominalConcurrencyShares": NODE_AGENTS_SHARES, "lendablePercent": NODE_AGENTS_LENDABLE,
                    # May not borrow: its seats are all it gets, however loaded the rest is not.
                    "borrowingLimitPercent": 0,
                    "limitResponse": {"type": "Queue", "queuing": dict(QUEUING)}}})
    agents = obj(API, "FlowSchema", NODE_AGENTS, spec={
        "priorityLevelConfiguration": {"name": NODE_AGENTS},
        "matchingPrecedence": NODE_AGENTS_PRECEDENCE,
        # One flow per agent: a runaway agent shares its queues with itself, not with the other agents.
        "distinguisherMethod": {"type": "ByUser"},
        "rules": [{"subjects": [{"kind": "ServiceAccount", "serviceAccount": {"namespace": ns, "name": name}}
                                for ns, name in accounts], **_everything()}]})
    breakglass = obj(API, "FlowSchema", BREAKGLASS, spec={
        "priorityLevelConfiguration": {"name": "exempt"},
        "matchingPrecedence": BREAKGLASS_PRECEDENCE,
        "rules": [{"subjects": [{"kind": "Group", "group": {"name": BREAKGLASS_GROUP}}], **_everything()}]})
    binding = obj("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", BREAKGLASS,
                  roleRef={"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
                  subjects=[{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": BREAKGLASS_GROUP}])
    return [level, agents, breakglass, binding]
