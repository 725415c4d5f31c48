"""Upstream projects the in-cluster layer installs, pinned (../shared/reference/kubernetes.md)."""

from __future__ import annotations

KUEUE_VERSION = "0.19.2"
KUEUE_CHART = "oci://registry.k8s.io/kueue/charts/kueue"
KUEUE_IMAGE = "registry.k8s.io/kueue/kueue"
KUEUE_NAMESPACE = "kueue-system"

SCHEDULER_PLUGINS_VERSION = "v0.34.7"
SCHEDULER_PLUGINS_KUBERNETES_MINOR = "1.34"
"""scheduler-plugins v0.X.Y is built against Kubernetes 1.X; the scheduler must not be newer than the API server."""
SCHEDULER_PLUGINS_SCHEDULER_IMAGE = f"registry.k8s.io/scheduler-plugins/kube-scheduler:{SCHEDULER_PLUGINS_VERSION}"
SCHEDULER_PLUGINS_CONTROLLER_IMAGE = f"registry.k8s.io/scheduler-plugins/controller:{SCHEDULER_PLUGINS_VERSION}"
SCHEDULER_PLUGINS_NAMESPACE = "scheduler-plugins"

CLUSTER_AUTOSCALER_IMAGE = "registry.k8s.io/autoscaling/cluster-autoscaler:v1.34.0"
"""cluster-autoscaler minor follows Kubernetes' (1.34)."""

CILIUM_CHART = "cilium"
CILIUM_REPO = "https://helm.cilium.io"
CILIUM_VERSION = "1.18.0"

GPU_OPERATOR_CHART = "gpu-operator"
GPU_OPERATOR_REPO = "https://helm.ngc.nvidia.com/nvidia"
GPU_OPERATOR_VERSION = "v25.3.0"

COREDNS_IMAGE = "registry.k8s.io/coredns/coredns:v1.12.1"
PAUSE_IMAGE = "registry.k8s.io/pause:3.10"
DCGM_IMAGE = "nvcr.io/nvidia/cloud-native/dcgm:4.2.3-1-ubuntu22.04"
HEALTH_AGENT_IMAGE = "python:3.12-slim"
"""Runs the library's health agent (stdlib only) that taints and untaints nodes through the API."""
