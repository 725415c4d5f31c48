"""InfiniBand in pods: Mellanox's RDMA shared device plugin on InfiniBand pools, so a pod that requests `rdma/ib`
gets the node's HCAs (/dev/infiniband) and NCCL runs over InfiniBand instead of falling back to sockets.

Read at Mellanox/k8s-rdma-shared-dev-plugin v1.5.3: README.md ("RDMA Shared Device Plugin Configurations": the
config.json fields, `resourcePrefix` default `rdma`, `rdmaHcaMax`; "Devices Selectors": vendors, linkTypes, logical
AND between selectors), pkg/resources/pci_net_device.go (linkType is the netdevice's encapsulation type, so
`infiniband` for the IPoIB interfaces and `ether` for Azure's accelerated-networking VF, also vendor 15b3),
deployment/k8s/base/daemonset.yaml (host network, privileged, the kubelet's device-plugin and plugin-registry
directories and /dev), .github/workflows/release.yaml (images ghcr.io/mellanox/k8s-rdma-shared-dev-plugin:<tag>).

A training pod asks for it and for what NCCL needs (docs/scheduling.md, "InfiniBand in pods"):
`resources.limits["rdma/ib"]: 1`, `securityContext.capabilities.add: [IPC_LOCK]` (registering memory with the HCA
pins it; CAP_IPC_LOCK lifts RLIMIT_MEMLOCK for the process, capabilities(7)), and a memory-backed /dev/shm.
"""

from __future__ import annotations

import json

from gpucluster.catalog.in_cluster import RDMA_DEVICE_PLUGIN_IMAGE, RDMA_HCA_MAX, RDMA_RESOURCE
from gpucluster.kubernetes.objects.common import Object, obj
from gpucluster.planning.node_template import uses_shared_rdma
from gpucluster.planning.placement import PoolPlan
from gpucluster.vocabulary import LABEL_APP, LABEL_POOL

NAMESPACE = "kube-system"
APP = "rdma-shared-device-plugin"
RESOURCE_PREFIX, RESOURCE_NAME = RDMA_RESOURCE.split("/")
"""What a pod requests: one unit gives it every InfiniBand HCA of its node (the devices are shared)."""
MELLANOX = "15b3"


def device_config() -> dict[str, object]:
    return {"periodicUpdateInterval": 300, "configList": [{
        "resourceName": RESOURCE_NAME, "resourcePrefix": RESOURCE_PREFIX, "rdmaHcaMax": RDMA_HCA_MAX,
        # Vendor and link type together: Azure's accelerated-networking VF is a Mellanox device too, on Ethernet.
        "selectors": {"vendors": [MELLANOX], "linkTypes": ["infiniband"]}}]}


def rdma_objects(pools: tuple[PoolPlan, ...]) -> list[Object]:
    """The plugin on every InfiniBand pool (none without one)."""
    pools_with_ib = sorted(p.name for p in pools if uses_shared_rdma(p))
    if not pools_with_ib:
        return []
    labels = {LABEL_APP: APP}
    pod = {
        "hostNetwork": True, "priorityClassName": "system-node-critical",
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": LABEL_POOL, "operator": "In", "values": pools_with_ib}]}]}}},
        # GPU nodes carry the preflight and pool taints until their checks pass; the HCAs must be allocatable then.
        "tolerations": [{"operator": "Exists"}],
        "automountServiceAccountToken": False,
        "containers": [{
            "name": "device-plugin", "image": RDMA_DEVICE_PLUGIN_IMAGE, "imagePullPolicy": "IfNotPresent",
            "securityContext": {"privileged": True},
            "resources": {"requests": {"cpu": "10m", "memory": "32Mi"}, "limits": {"memory": "128Mi"}},
            "volumeMounts": [
                {"name": "device-plugin", "mountPath": "/var/lib/kubelet/device-plugins"},
                {"name": "plugins-registry", "mountPath": "/var/lib/kubelet/plugins_registry"},
                {"name": "config", "mountPath": "/k8s-rdma-shared-dev-plugin"},
                {"name": "devs", "mountPath": "/dev/"}],
        }],
        "volumes": [
            {"name": "device-plugin", "hostPath": {"path": "/var/lib/kubelet/device-plugins"}},
            {"name": "plugins-registry", "hostPath": {"path": "/var/lib/kubelet/plugins_registry"}},
            {"name": "config", "configMap": {"name": APP, "items": [{"key": "config.json", "path": "config.json"}]}},
            {"name": "devs", "hostPath": {"path": "/dev/"}}],
    }
    return [
        obj("v1", "ConfigMap", APP, NAMESPACE, data={"config.json": json.dumps(device_config(), indent=2)}),
        obj("apps/v1", "DaemonSet", APP, NAMESPACE, labels=labels, spec={
            "selector": {"matchLabels": labels},
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "10%"}},
            "template": {"metadata": {"labels": labels}, "spec": pod}}),
    ]
