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
