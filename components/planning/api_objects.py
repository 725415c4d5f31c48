"""Objects as the API server stores them, built from the plan, to weigh each kind in the sizing model.

Pure. Each builder returns one representative object of its kind with the fields the API server and the
kubelet fill in (defaults, status), so its JSON size is what one such object costs in etcd (an upper bound:
built-in kinds are stored as protobuf, which is smaller) and in the API servers' watch cache. The values
are the plan's own (labels, taints, sizes, image references from the cluster's registry); only identities
(uids, digests, times) are fixed-width stand-ins of the real ones' length.
"""

from __future__ import annotations

import json
from typing import Any

from gpucluster.planning.taints import NodeTaint
from gpucluster.vocabulary import (
    ANNOTATION_ATTACH_DETACH,
    ANNOTATION_CRI_SOCKET,
    ANNOTATION_NODE_TTL,
    GPU_RESOURCE,
    LABEL_ARCH,
    LABEL_BETA_ARCH,
    LABEL_BETA_OS,
    LABEL_HOSTNAME,
    LABEL_JOB_CONTROLLER_UID,
    LABEL_JOB_NAME,
    LABEL_OS,
    NODE_NAMESPACE,
)

NODE_STATUS_MAX_IMAGES = 50
"""kubelet `nodeStatusMaxImages` default: the images a node reports in status.images (k8s.io/kubelet
config/v1beta1 types.go, NodeStatusMaxImages; kubelet v1.36 pkg/kubelet/apis/config/v1beta1/defaults.go)."""
UID = "0" * 8 + "-0000-0000-0000-" + "0" * 12
DIGEST = "sha256:" + "0" * 64
TIME = "2026-01-01T00:00:00Z"
NODE_CONDITIONS = (("MemoryPressure", "False", "KubeletHasSufficientMemory"),
                   ("DiskPressure", "False", "KubeletHasNoDiskPressure"),
                   ("PIDPressure", "False", "KubeletHasSufficientPID"),
                   ("Ready", "True", "KubeletReady"),
                   ("NetworkUnavailable", "False", "CiliumIsUp"))
"""The kubelet's four conditions (pkg/kubelet/nodestatus/setters.go) and the CNI's NetworkUnavailable."""
POD_CONDITIONS = ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled")
"""What the kubelet and scheduler set on a running pod (k8s.io/api core/v1 types.go, PodConditionType)."""


def json_size(obj: dict[str, Any]) -> int:
    """Bytes of the object as the API serves it (compact JSON)."""
    return len(json.dumps(obj, separators=(",", ":")).encode())


def _meta(name: str, namespace: str | None = None, labels: dict[str, str] | None = None,
          annotations: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "uid": UID, "resourceVersion": "1234567890", "creationTimestamp": TIME}
    if namespace:
        meta["namespace"] = namespace
    if labels:
        meta["labels"] = labels
    if annotations:
        meta["annotations"] = annotations
    return meta


def node_object(name: str, labels: dict[str, str], taints: tuple[NodeTaint, ...], vcpus: int, memory_gib: int,
                gpus: int, max_pods: int, provider_id: str, images: tuple[str, ...]) -> dict[str, Any]:
    """A registered, Ready node: the kubelet's well-known labels beside the plan's, its taints, capacity and
    allocatable, conditions, addresses, node info and up to `NODE_STATUS_MAX_IMAGES` images."""
    well_known = {LABEL_ARCH: "amd64", LABEL_OS: "linux", LABEL_HOSTNAME: name,
                  LABEL_BETA_ARCH: "amd64", LABEL_BETA_OS: "linux"}
    capacity = {"cpu": str(vcpus), "memory": f"{memory_gib * 1024 * 1024}Ki", "pods": str(max_pods),
                "ephemeral-storage": "1073741824Ki", "hugepages-1Gi": "0", "hugepages-2Mi": "0",
                **({GPU_RESOURCE: str(gpus)} if gpus else {})}
    shown = [images[i % len(images)] for i in range(min(NODE_STATUS_MAX_IMAGES, len(images)))] if images else []
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": _meta(name, labels={**well_known, **labels}, annotations={
            ANNOTATION_NODE_TTL: "0", ANNOTATION_ATTACH_DETACH: "true",
            ANNOTATION_CRI_SOCKET: "unix:///var/run/containerd/containerd.sock"}),
        "spec": {"providerID": provider_id,
                 "taints": [{"key": t.key, "value": t.value, "effect": t.effect} for t in taints]},
        "status": {
            "capacity": capacity, "allocatable": capacity,
            "conditions": [{"type": kind, "status": status, "lastHeartbeatTime": TIME, "lastTransitionTime": TIME,
                            "reason": reason, "message": f"{reason} condition"} for kind, status, reason in
                           NODE_CONDITIONS],
            "addresses": [{"type": "InternalIP", "address": "10.255.255.255"}, {"type": "Hostname", "address": name}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {"machineID": "0" * 32, "systemUUID": UID, "bootID": UID, "kernelVersion": "6.8.0-1000-azure",
                         "osImage": "Ubuntu 22.04.5 LTS", "containerRuntimeVersion": "containerd://2.1.0",
                         "kubeletVersion": "v1.36.0", "kubeProxyVersion": "", "operatingSystem": "linux",
                         "architecture": "amd64"},
            "images": [{"names": [f"{ref.rsplit(':', 1)[0]}@{DIGEST}", ref], "sizeBytes": 1_000_000_000}
                       for ref in shown],
        },
    }


def pod_object(node: str, image: str, gpus: int) -> dict[str, Any]:
    """A one-container pod of a Job, as stored once running: the fields defaulting adds
    (kubernetes pkg/apis/core/v1/defaults.go), the service-account token volume the ServiceAccount admission
    plugin mounts, the default not-ready/unreachable tolerations, and a running status."""
    name = "job-0000000000-00000"
    resources = {"limits": {GPU_RESOURCE: str(gpus)}, "requests": {GPU_RESOURCE: str(gpus)}} if gpus else {
        "requests": {"cpu": "1", "memory": "1Gi"}}
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {**_meta(name, "team-0000000000", labels={
            LABEL_JOB_CONTROLLER_UID: UID, LABEL_JOB_NAME: "job-0000000000",
            "controller-uid": UID, "job-name": "job-0000000000"}),
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "job-0000000000", "uid": UID,
                                 "controller": True, "blockOwnerDeletion": True}]},
        "spec": {
            "containers": [{"name": "main", "image": image, "imagePullPolicy": "IfNotPresent", "resources": resources,
                            "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
                            "volumeMounts": [{"name": "kube-api-access-00000", "readOnly": True,
                                              "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}]}],
            "dnsPolicy": "ClusterFirst", "enableServiceLinks": True, "nodeName": node, "preemptionPolicy":
                "PreemptLowerPriority", "priority": 0, "restartPolicy": "Never", "schedulerName": "default-scheduler",
            "securityContext": {}, "serviceAccount": "default", "serviceAccountName": "default",
            "terminationGracePeriodSeconds": 30,
            "tolerations": [{"key": f"{NODE_NAMESPACE}/{t}", "operator": "Exists", "effect": "NoExecute",
                             "tolerationSeconds": 300} for t in ("not-ready", "unreachable")],
            "volumes": [{"name": "kube-api-access-00000", "projected": {"defaultMode": 420, "sources": [
                {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                {"downwardAPI": {"items": [{"path": "namespace",
                                            "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}]}}],
        },
        "status": {
            "phase": "Running", "qosClass": "Burstable", "startTime": TIME,
            "hostIP": "10.255.255.255", "hostIPs": [{"ip": "10.255.255.255"}],
            "podIP": "10.255.255.255", "podIPs": [{"ip": "10.255.255.255"}],
            "conditions": [{"type": c, "status": "True", "lastProbeTime": None, "lastTransitionTime": TIME}
                           for c in POD_CONDITIONS],
            "containerStatuses": [{"name": "main", "image": image, "imageID": f"{image.rsplit(':', 1)[0]}@{DIGEST}",
                                   "containerID": "containerd://" + "0" * 64, "ready": True, "started": True,
                                   "restartCount": 0, "state": {"running": {"startedAt": TIME}}, "lastState": {}}],
        },
    }


def lease_object(node: str) -> dict[str, Any]:
    """The node's heartbeat in kube-node-lease (k8s.io/api coordination/v1)."""
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {**_meta(node, "kube-node-lease"), "ownerReferences": [
                {"apiVersion": "v1", "kind": "Node", "name": node, "uid": UID}]},
            "spec": {"holderIdentity": node, "leaseDurationSeconds": 40, "renewTime": "2026-01-01T00:00:00.000000Z"}}


def event_object(node: str, image: str) -> dict[str, Any]:
    """The commonest event of a pod start: the kubelet's `Pulled`."""
    return {"apiVersion": "v1", "kind": "Event",
            "metadata": _meta("job-0000000000-00000.0000000000000000", "team-0000000000"),
            "involvedObject": {"apiVersion": "v1", "kind": "Pod", "name": "job-0000000000-00000",
                               "namespace": "team-0000000000", "uid": UID, "resourceVersion": "1234567890",
                               "fieldPath": "spec.containers{main}"},
            "reason": "Pulled", "message": f'Successfully pulled image "{image}" in 1.234s (1.234s including waiting)',
            "source": {"component": "kubelet", "host": node}, "firstTimestamp": TIME, "lastTimestamp": TIME,
            "count": 1, "type": "Normal", "reportingComponent": "kubelet", "reportingInstance": node}
