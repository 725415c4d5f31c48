"""How each Helm release is installed: whether the install waits for the chart's workloads, whether a failure rolls
back, and how long it may take. Pure: the components declare releases with these options and the first-boot
simulation judges them (components/simulation/release_readiness.py).

pulumi-kubernetes 4.x installs a `helm.v3.Release` with the Helm library: `client.Wait = !skipAwait`,
`client.Atomic = atomic` (provider/pkg/provider/helm_release.go). Helm's install sets Wait whenever Atomic is set
and, when an atomic install fails, uninstalls the release (helm pkg/action/install.go): for the CNI that removes
every node's agent. So no release here is atomic, and a release whose readiness rule cannot be met at the cluster's
size does not wait (helm pkg/kube/ready.go: a DaemonSet is ready when `numberReady >= desired - maxUnavailable`).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ReleaseOptions:
    chart: str
    """The chart's key in components/catalog/chart_images.py."""
    wait: bool
    """Helm waits for the chart's workloads (skipAwait false)."""
    atomic: bool
    timeout_seconds: int
    waits_for: tuple[str, ...]
    """The chart's workloads Helm's wait judges (components/simulation/bring_up_layer.py chart_objects names)."""
    why: str


CILIUM_RELEASE = ReleaseOptions(
    "cilium", wait=False, atomic=False, timeout_seconds=900, waits_for=("cilium-agent", "cilium-operator"),
    why="the agent DaemonSet runs on every node: Helm's rule needs all but updateStrategy.maxUnavailable of them "
        "ready within the timeout, which a cluster of thousands of joining nodes does not promise")
KUEUE_RELEASE = ReleaseOptions(
    "kueue", wait=True, atomic=False, timeout_seconds=600, waits_for=("kueue-controller-manager",),
    why="Kueue's objects are applied after the release and pass its webhooks (failurePolicy Fail): they need the "
        "controller serving; two replicas on system nodes")
GPU_OPERATOR_RELEASE = ReleaseOptions(
    "gpu-operator", wait=False, atomic=False, timeout_seconds=900,
    waits_for=("gpu-operator", "nfd-master", "nfd-gc", "nfd-worker"),
    why="the NFD worker DaemonSet runs on every node (as Cilium's agent); the operands are the operator's, not "
        "Helm's")
RELEASES = (CILIUM_RELEASE, KUEUE_RELEASE, GPU_OPERATOR_RELEASE)
DRA_DRIVER_RELEASE = ReleaseOptions(
    "nvidia-dra-driver-gpu", wait=False, atomic=False, timeout_seconds=600,
    waits_for=("nvidia-dra-driver-gpu-controller", "nvidia-dra-driver-gpu-kubelet-plugin"),
    why="the kubelet plugin DaemonSet runs on every rack node, which may still be joining; nothing in the layer "
        "waits on ComputeDomains")
DRANET_RELEASE = ReleaseOptions(
    "dranet", wait=False, atomic=False, timeout_seconds=600, waits_for=("dranet",),
    why="its DaemonSet runs on every rack node (the chart's updateStrategy is the apps/v1 default, maxUnavailable 1)")
RACK_RELEASES = (DRA_DRIVER_RELEASE, DRANET_RELEASE)
"""Only on clusters with rack pools (components/kubernetes/rack_devices.py)."""
