"""What a Kubernetes minor stopped serving or applying: API versions, node labels and taints, component flags.

The plan checks everything it renders (manifests, chart values, boot documents) against these rows
(components/offline/removals.py): a use of something the stack's minor already removed is a plan error, and what the
next minor removes is listed before anyone moves `kubernetesVersion` up. Reddit's 1.24 upgrade removed the
`node-role.kubernetes.io/master` label its CNI's route reflectors were selected on (docs/control-plane.md).

Sources: API versions from kubernetes/website content/en/docs/reference/using-api/deprecation-guide.md ("Removed
APIs by release", read through v1.32, its latest entry, with nothing listed for 1.33 to 1.36); the kubeadm label and
taint from kubernetes/enhancements keps/sig-cluster-lifecycle/kubeadm/2067-rename-master-label-taint (label no longer
applied in 1.24, taint in 1.25); kubelet flags from kubernetes/kubernetes CHANGELOG/CHANGELOG-1.24.md ("dockershim
related flags are also removed along with dockershim", #106907).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from gpucluster.vocabulary import LABEL_CONTROL_PLANE, LABEL_MASTER_REMOVED

GUIDE = "kubernetes/website deprecation-guide.md"
KEP_2067 = "kubernetes/enhancements KEP-2067 (kubeadm: rename the master label and taint)"
CHANGELOG_124 = "kubernetes/kubernetes CHANGELOG-1.24.md (#106907)"
READ_THROUGH = "1.36"
"""The newest minor whose removals these rows were checked against."""


@dataclass(frozen=True)
class RemovedApi:
    api_version: str
    kinds: tuple[str, ...]
    removed_in: str
    use: str
    source: str = GUIDE


@dataclass(frozen=True)
class RemovedName:
    what: Literal["label", "taint", "flag"]
    name: str
    removed_in: str
    use: str
    source: str


def _apis(minor: str, use: str, *rows: tuple[str, tuple[str, ...]]) -> tuple[RemovedApi, ...]:
    return tuple(RemovedApi(version, kinds, minor, use) for version, kinds in rows)


REMOVED_APIS: tuple[RemovedApi, ...] = (
    *_apis("1.16", "apps/v1 (networking.k8s.io/v1 for NetworkPolicy)",
           ("extensions/v1beta1", ("NetworkPolicy", "DaemonSet", "Deployment", "ReplicaSet")),
           ("apps/v1beta1", ("Deployment", "StatefulSet", "ReplicaSet")),
           ("apps/v1beta2", ("DaemonSet", "Deployment", "StatefulSet", "ReplicaSet"))),
    *_apis("1.22", "the v1 API of the same group",
           ("admissionregistration.k8s.io/v1beta1", ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")),
           ("apiextensions.k8s.io/v1beta1", ("CustomResourceDefinition",)),
           ("apiregistration.k8s.io/v1beta1", ("APIService",)),
           ("certificates.k8s.io/v1beta1", ("CertificateSigningRequest",)),
           ("coordination.k8s.io/v1beta1", ("Lease",)),
           ("extensions/v1beta1", ("Ingress",)),
           ("networking.k8s.io/v1beta1", ("Ingress", "IngressClass")),
           ("rbac.authorization.k8s.io/v1beta1", ("ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")),
           ("scheduling.k8s.io/v1beta1", ("PriorityClass",)),
           ("storage.k8s.io/v1beta1", ("CSIDriver", "CSINode", "StorageClass", "VolumeAttachment"))),
    *_apis("1.25", "the v1 API (autoscaling/v2 for HorizontalPodAutoscaler; Pod Security Admission for PSP)",
           ("batch/v1beta1", ("CronJob",)),
           ("discovery.k8s.io/v1beta1", ("EndpointSlice",)),
           ("events.k8s.io/v1beta1", ("Event",)),
           ("autoscaling/v2beta1", ("HorizontalPodAutoscaler",)),
           ("policy/v1beta1", ("PodDisruptionBudget", "PodSecurityPolicy")),
           ("node.k8s.io/v1beta1", ("RuntimeClass",))),
    *_apis("1.26", "flowcontrol.apiserver.k8s.io/v1, autoscaling/v2",
           ("flowcontrol.apiserver.k8s.io/v1beta1", ("FlowSchema", "PriorityLevelConfiguration")),
           ("autoscaling/v2beta2", ("HorizontalPodAutoscaler",))),
    *_apis("1.27", "storage.k8s.io/v1", ("storage.k8s.io/v1beta1", ("CSIStorageCapacity",))),
    *_apis("1.29", "flowcontrol.apiserver.k8s.io/v1",
           ("flowcontrol.apiserver.k8s.io/v1beta2", ("FlowSchema", "PriorityLevelConfiguration"))),
    *_apis("1.32", "flowcontrol.apiserver.k8s.io/v1",
           ("flowcontrol.apiserver.k8s.io/v1beta3", ("FlowSchema", "PriorityLevelConfiguration"))),
)

_DOCKERSHIM_FLAGS = ("--experimental-dockershim-root-directory", "--docker-endpoint", "--image-pull-progress-deadline",
                     "--network-plugin", "--cni-conf-dir", "--cni-bin-dir", "--cni-cache-dir", "--network-plugin-mtu")

REMOVED_NAMES: tuple[RemovedName, ...] = (
    RemovedName("label", LABEL_MASTER_REMOVED, "1.24", LABEL_CONTROL_PLANE, KEP_2067),
    RemovedName("taint", LABEL_MASTER_REMOVED, "1.25", LABEL_CONTROL_PLANE, KEP_2067),
    *(RemovedName("flag", flag, "1.24", "the CRI runtime's own configuration (kubelet flag removed with dockershim)",
                  CHANGELOG_124) for flag in _DOCKERSHIM_FLAGS),
)
