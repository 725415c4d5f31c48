"""Shared shapes: object skeletons and where cluster add-ons run."""

from __future__ import annotations

from typing import Any

from gpucluster.planning.taints import NodeTaint
from gpucluster.vocabulary import LABEL_APP, LABEL_HOSTNAME, LABEL_PART_OF, LABEL_ROLE, LABEL_ZONE

Object = dict[str, Any]
SYSTEM_PRIORITY_CLASS = "gpucluster-system"


def obj(api_version: str, kind: str, name: str, namespace: str | None = None, labels: dict[str, str] | None = None,
        **body: Any) -> Object:
    metadata: dict[str, Any] = {"name": name}
    if namespace:
        metadata["namespace"] = namespace
    metadata["labels"] = {LABEL_PART_OF: "gpucluster", **(labels or {})}
    return {"apiVersion": api_version, "kind": kind, "metadata": metadata, **body}


def toleration(taint: NodeTaint) -> dict[str, str]:
    return {"key": taint.key, "operator": "Equal", "value": taint.value, "effect": taint.effect}


def on_system_nodes(app: str) -> dict[str, Any]:
    """Pod-spec fields for a cluster add-on: system pool, spread over zones, never preempted by work."""
    selector = {"matchLabels": {LABEL_APP: app}}
    return {
        "nodeSelector": {LABEL_ROLE: "system"},
        "priorityClassName": SYSTEM_PRIORITY_CLASS,
        "topologySpreadConstraints": [
            {"maxSkew": 1, "topologyKey": LABEL_ZONE, "whenUnsatisfiable": "DoNotSchedule", "labelSelector": selector},
            {"maxSkew": 1, "topologyKey": LABEL_HOSTNAME, "whenUnsatisfiable": "ScheduleAnyway",
             "labelSelector": selector},
        ],
    }


def pod_disruption_budget(name: str, namespace: str, app: str, min_available: int = 1) -> Object:
    return obj("policy/v1", "PodDisruptionBudget", name, namespace,
               spec={"minAvailable": min_available, "selector": {"matchLabels": {LABEL_APP: app}}})
