"""The control plane's scheduler: the stock kube-scheduler of the cluster's minor, bin-packing GPUs.

Gangs are placed by Kueue, not by a scheduler plugin (docs/scheduling.md): Kueue admits a whole
workload only when its topology-aware scheduling finds nodes for every pod in one InfiniBand domain,
pins each pod to its node with a nodeSelector, and evicts and requeues the workload when its pods
are not all ready in time (`waitForPodsReady`). The scheduler binds pods that already have a node
chosen; it only needs to pack non-gang pods tightly so whole nodes stay free for gangs.
"""

from __future__ import annotations

from typing import Any

from gpucluster.vocabulary import GPU_RESOURCE

SCHEDULER_CONFIG_PATH = "/etc/kubernetes/scheduler-config.yaml"
GPU_WEIGHT = 5
"""Bin-pack GPUs hardest: a half-used GPU node blocks a whole-node job; CPU and memory weigh 1."""


def scheduler_configuration() -> dict[str, Any]:
    """KubeSchedulerConfiguration (kubescheduler.config.k8s.io/v1) of the control plane's scheduler."""
    return {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"kubeconfig": "/etc/kubernetes/scheduler.conf", "qps": 300, "burst": 400},
        "leaderElection": {"leaderElect": True},
        "profiles": [{
            "schedulerName": "default-scheduler",
            "pluginConfig": [
                {"name": "NodeResourcesFit", "args": {"scoringStrategy": {
                    "type": "MostAllocated",
                    "resources": [{"name": GPU_RESOURCE, "weight": GPU_WEIGHT}, {"name": "cpu", "weight": 1},
                                  {"name": "memory", "weight": 1}]}}},
            ],
        }],
    }
