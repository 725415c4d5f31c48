"""Rack pools' DRA drivers: NVIDIA's DRA driver serving ComputeDomains (IMEX channels across a rack's NVLink) and
DRANET serving the InfiniBand NICs, both on rack nodes only. GPUs stay the device plugin's `nvidia.com/gpu`
(docs/rack-scale.md, "One rack per gang").

Values read at kubernetes-sigs/dra-driver-nvidia-gpu v25.12.0 deployments/helm/nvidia-dra-driver-gpu/values.yaml and
templates/ (controller.yaml, kubeletplugin.yaml, validation.yaml), and kubernetes-sigs/dranet v1.4.0
deployments/helm/dranet/values.yaml, values.schema.json (no property outside it) and templates/daemonset.yaml.
Helm merges maps and replaces lists, so a `nodeSelectorTerms` list given here replaces the chart's default terms.
"""

from __future__ import annotations

from typing import Any

from gpucluster.kubernetes.objects.common import Object, obj, on_system_nodes
from gpucluster.planning.placement import PoolPlan
from gpucluster.vocabulary import LABEL_POOL, LABEL_ROLE

DRANET_DEVICE_CLASS = "dranet.net"
"""DRANET's chart creates no DeviceClass; this one is the class DRANET's own examples define and claim from
(kubernetes-sigs/dranet v1.4.0 examples/distributed_training/device-class.yaml, examples/azure_aks_examples/gb300/
resource-claim-template.yaml `deviceClassName: dranet.net`)."""
DRANET_DRIVER = "dra.net"
"""The driver name DRANET publishes its ResourceSlices under (examples/azure_aks_examples/gb300/
resourceslice-dranet.yaml `driver: dra.net`)."""
EVERY_TAINT = [{"operator": "Exists"}]
"""Rack nodes register with the pool's `nvidia.com/gpu` taint and the preflight taint; the drivers must serve the
node's devices before the health checks remove the latter (as the RDMA and GPU operator daemons do)."""


def rack_pools(pools: tuple[PoolPlan, ...]) -> list[str]:
    return sorted(p.name for p in pools if p.racks is not None)


def on_rack_nodes(pools: tuple[PoolPlan, ...]) -> dict[str, Any]:
    """Required node affinity to the rack pools' nodes (the pool label every node registers with)."""
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": LABEL_POOL, "operator": "In", "values": rack_pools(pools)}]}]}}}


def dra_driver_values(pools: tuple[PoolPlan, ...]) -> dict[str, Any]:
    """ComputeDomains only. `resources.gpus.enabled` false: the chart refuses the GPU plugin beside the device plugin
    unless overridden (validation.yaml, "cannot be deployed alongside the standard GPU device plugin"), and GPUs stay
    `nvidia.com/gpu`, which Kueue's TAS counts. The rack image carries the driver on the host: `nvidiaDriverRoot: /`
    ("For driver installed directly on a host, a value of `/` is used"). The controller's default affinity asks for
    control-plane nodes (values.yaml controller.affinity); it runs on the system pool instead."""
    system = on_system_nodes("nvidia-dra-driver-gpu")["nodeSelector"]
    return {
        "nvidiaDriverRoot": "/",
        "resources": {"gpus": {"enabled": False}, "computeDomains": {"enabled": True}},
        "controller": {
            "nodeSelector": system,
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": LABEL_ROLE, "operator": "In", "values": [system[LABEL_ROLE]]}]}]}}},
        },
        # The default terms (NFD's pci-10de label, a Tegra CPU, nvidia.com/gpu.present) would take every GPU node.
        "kubeletPlugin": {"affinity": on_rack_nodes(pools), "tolerations": EVERY_TAINT},
    }


def dranet_values(pools: tuple[PoolPlan, ...]) -> dict[str, Any]:
    """GB300's InfiniBand VFs have no Ethernet netdev: DRANET publishes them as RDMA-only devices with
    `--move-ib-interfaces=false` (kubernetes-sigs/dranet v1.4.0 examples/azure_aks_examples/README.md, "Cluster
    prerequisites"; cmd/dranet/app.go `move-ib-interfaces`) and reads Azure's placement attributes from IMDS with the
    AZURE provider (values.schema.json args.cloudProviderHint). The default-gateway NIC and its VF stay out of its
    inventory (pkg/inventory/net.go getExcludedUplinkInterfaces)."""
    return {
        "args": {"moveIBInterfaces": False, "cloudProviderHint": "AZURE"},
        "affinity": on_rack_nodes(pools),
        "tolerations": EVERY_TAINT,
    }


DRANET_DB_DIR = "/var/run/dranet"
"""DRANET keeps prepared pods' device configuration in a bbolt database, `--db-path` default
`/var/run/dranet/dranet.db`, "so NRI hooks can continue initialization after a driver restart": "deployment manifests
must mount `/var/run/dranet` as writable storage (hostPath with `DirectoryOrCreate`...)" (kubernetes-sigs/dranet v1.4.0
README.md; cmd/dranet/app.go `db-path`; install.yaml mounts it). The chart at v1.4.0 mounts none and its schema takes
no extra volume or argument (templates/daemonset.yaml, values.schema.json `additionalProperties: false`; upstream
added `extraVolumes` after the tag, commit e8480b2 "Support extra volumes and mounts in the Helm chart")."""
DRANET_DAEMONSET = "dranet"
"""The chart's DaemonSet and container name: `dranet.fullname` is the release name when it contains the chart name
(templates/_helpers.tpl), and the release is named after the chart (objects/releases.py DRANET_RELEASE)."""


def dranet_db_mount(namespace: str) -> Object:
    """A server-side-apply patch of the chart's DaemonSet adding the writable hostPath the chart lacks. Volumes,
    containers and volume mounts merge by key under server-side apply (name; name; mountPath), so the chart keeps
    owning everything else, and a Helm upgrade's three-way merge leaves fields it never set."""
    return obj("apps/v1", "DaemonSet", DRANET_DAEMONSET, namespace, spec={"template": {"spec": {
        "containers": [{"name": DRANET_DAEMONSET, "volumeMounts": [{"name": "dranet-db", "mountPath": DRANET_DB_DIR}]}],
        "volumes": [{"name": "dranet-db", "hostPath": {"path": DRANET_DB_DIR, "type": "DirectoryOrCreate"}}],
    }}})


def dranet_device_class() -> Object:
    """resource.k8s.io/v1 (served from Kubernetes 1.34)."""
    return obj("resource.k8s.io/v1", "DeviceClass", DRANET_DEVICE_CLASS,
               spec={"selectors": [{"cel": {"expression": f'device.driver == "{DRANET_DRIVER}"'}}]})
