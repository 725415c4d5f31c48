"""PriorityClasses: system add-ons above all work; balloons at the autoscaler's expendable cutoff."""

from __future__ import annotations

from gpucluster.kubernetes.objects.common import Object, obj
from gpucluster.planning.scheduling import PRIORITY_CLASSES


def priority_classes() -> list[Object]:
    return [
        obj("scheduling.k8s.io/v1", "PriorityClass", p.name, value=p.value, globalDefault=p.global_default,
            description=p.description, preemptionPolicy="PreemptLowerPriority" if p.preempts else "Never")
        for p in PRIORITY_CLASSES
    ]
