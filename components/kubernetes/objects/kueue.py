"""Kueue objects (kueue.x-k8s.io/v1beta2) and the controller's Configuration, from the scheduling plan."""

from __future__ import annotations

from typing import Any

import yaml

from components.catalog.in_cluster import KUEUE_IMAGE, KUEUE_NAMESPACE, KUEUE_VERSION
from components.kubernetes.objects.common import Object, obj, on_system_nodes, toleration
from components.planning.scheduling import (
    GPU,
    TEAM_LABEL,
    TOPOLOGY_LEVELS,
    TOPOLOGY_NAME,
    WORKLOAD_CLASSES,
    FlavorPlan,
    SchedulingPlan,
    TeamQueuePlan,
)
from components.spec import Quota

API = "kueue.x-k8s.io/v1beta2"
RESOURCES = ("cpu", "memory", GPU)
LABEL_QUEUE = "kueue.x-k8s.io/queue-name"
ANNOTATION_REQUIRED_TOPOLOGY = "kueue.x-k8s.io/podset-required-topology"
KUEUE_REPLICAS = 2


def topology() -> Object:
    return obj(API, "Topology", TOPOLOGY_NAME, spec={"levels": [{"nodeLabel": label} for label in TOPOLOGY_LEVELS]})


def resource_flavor(flavor: FlavorPlan) -> Object:
    spec: dict[str, Any] = {"nodeLabels": dict(flavor.node_labels)}
    if flavor.node_taints:
        spec["nodeTaints"] = [{"key": t.key, "value": t.value, "effect": t.effect} for t in flavor.node_taints]
    if flavor.tolerations:
        spec["tolerations"] = [toleration(t) for t in flavor.tolerations]
    if flavor.topology:
        spec["topologyName"] = flavor.topology
    return obj(API, "ResourceFlavor", flavor.name, spec=spec)


def cohort(plan: SchedulingPlan) -> Object:
    """The root of every team queue: unused quota of one team is lent to the others by fair share."""
    return obj(API, "Cohort", plan.cohort, spec={})


def _amounts(quota: Quota) -> dict[str, int | str]:
    return {"cpu": quota.cpus, "memory": f"{quota.memory_gib}Gi", GPU: quota.gpus}


def _resources(nominal: Quota, borrowing: Quota | None, lending: Quota | None) -> list[dict[str, Any]]:
    rows = []
    for name in RESOURCES:
        row: dict[str, Any] = {"name": name, "nominalQuota": _amounts(nominal)[name]}
        if borrowing is not None:
            row["borrowingLimit"] = _amounts(borrowing)[name]
        if lending is not None:
            row["lendingLimit"] = _amounts(lending)[name]
        rows.append(row)
    return rows


def cluster_queue(plan: SchedulingPlan, team: TeamQueuePlan) -> Object:
    research = next(p.value for p in WORKLOAD_CLASSES if p.name == "research")
    return obj(API, "ClusterQueue", team.name, labels={TEAM_LABEL: team.name}, spec={
        "cohortName": plan.cohort,
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": team.namespace}},
        "queueingStrategy": "BestEffortFIFO",
        "resourceGroups": [{
            "coveredResources": list(RESOURCES),
            "flavors": [{"name": f.flavor, "resources": _resources(f.nominal, f.borrowing_limit, f.lending_limit)}
                        for f in team.flavors],
        }],
        "fairSharing": {"weight": team.weight},
        "preemption": {
            # Take back lent quota from any borrower; inside the team, higher priority first.
            "reclaimWithinCohort": "Any",
            "withinClusterQueue": "LowerPriority",
            "borrowWithinCohort": {"policy": "LowerPriority", "maxPriorityThreshold": research},
        },
    })


def team_namespace(team: TeamQueuePlan) -> Object:
    return obj("v1", "Namespace", team.namespace, labels={TEAM_LABEL: team.name})


def local_queue(team: TeamQueuePlan) -> Object:
    return obj(API, "LocalQueue", team.name, team.namespace, labels={TEAM_LABEL: team.name},
               spec={"clusterQueue": team.name})


def kueue_objects(plan: SchedulingPlan) -> list[Object]:
    """Custom resources, in an order `kubectl apply` accepts (referenced objects first)."""
    objects = [topology(), *(resource_flavor(f) for f in plan.flavors), cohort(plan)]
    for team in plan.teams:
        objects += [cluster_queue(plan, team), team_namespace(team), local_queue(team)]
    return objects


def kueue_configuration(pods_ready_timeout_minutes: int) -> dict[str, Any]:
    """config.kueue.x-k8s.io/v1beta2 Configuration: fair sharing on, all-or-nothing admission for gangs."""
    return {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "health": {"healthProbeBindAddress": ":8081"},
        "metrics": {"bindAddress": ":8443", "enableClusterQueueResources": True},
        "webhook": {"port": 9443},
        "leaderElection": {"leaderElect": True, "resourceName": "c1f6bfd2.kueue.x-k8s.io"},
        # Thousands of workloads at 7,500 nodes: more client throughput than the chart's 50/100.
        "clientConnection": {"qps": 100, "burst": 200},
        "managedJobsNamespaceSelector": {"matchExpressions": [
            {"key": "kubernetes.io/metadata.name", "operator": "NotIn",
             "values": ["kube-system", KUEUE_NAMESPACE]}]},
        "waitForPodsReady": {
            "timeout": f"{pods_ready_timeout_minutes}m",
            "blockAdmission": False,
            "requeuingStrategy": {"timestamp": "Eviction", "backoffBaseSeconds": 60, "backoffMaxSeconds": 3600},
        },
        "integrations": {"frameworks": ["batch/job", "jobset.x-k8s.io/jobset", "kubeflow.org/pytorchjob",
                                        "kubeflow.org/mpijob", "trainer.kubeflow.org/trainjob"]},
        "fairSharing": {"preemptionStrategies": ["LessThanOrEqualToFinalShare", "LessThanInitialShare"]},
    }


def kueue_chart_values(pods_ready_timeout_minutes: int) -> dict[str, Any]:
    placement = on_system_nodes("kueue")
    return {
        "controllerManager": {
            "replicas": KUEUE_REPLICAS,
            "manager": {
                "image": {"repository": KUEUE_IMAGE, "tag": f"v{KUEUE_VERSION}", "pullPolicy": "IfNotPresent"},
                "priorityClassName": placement["priorityClassName"],
                "resources": {"requests": {"cpu": "2", "memory": "4Gi"}, "limits": {"cpu": "4", "memory": "8Gi"}},
            },
            "nodeSelector": placement["nodeSelector"],
            # The chart's pods carry app.kubernetes.io/name: kueue.
            "topologySpreadConstraints": placement["topologySpreadConstraints"],
            "podDisruptionBudget": {"enabled": True, "minAvailable": 1},
        },
        "managerConfig": {"controllerManagerConfigYaml": yaml.safe_dump(
            kueue_configuration(pods_ready_timeout_minutes), sort_keys=False)},
    }
