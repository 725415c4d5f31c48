"""The in-cluster layer: Kubernetes objects built as plain dicts (objects/) and declared through a provider.

`in_cluster.py` (`InCluster`) composes the layer from one component per concern: `networking.py` (Cilium, the
prefix IPAM controller, DNS), `capacity.py` (cluster-autoscaler, balloons, cloud-node-lifecycle, the rollout
controller), `gpu_health.py` (the GPU operator, health checks, RDMA devices), `scheduling.py` (priority classes,
Kueue), `rack_devices.py` (NVLink racks' DRA drivers); `join_access.py` declares what joining nodes need,
`readiness_gate.py` the wait for Cilium's agents on most nodes, `helm_release.py` every chart's release, `declare.py` each
object with the typed class of its kind (the node agents themselves are agents/ at the top); `crds/` the
vendored CustomResourceDefinitions.
"""
