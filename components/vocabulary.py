"""Every label, taint, annotation and tag name the cluster uses, spelled once.

The bottom of components/: standard library only, imported by the spec, planners, boot text, Azure
components, in-cluster objects and the simulation alike (tests/test_vocabulary.py fails on a name spelled
anywhere else). The policy pack runs as a folder of its own and keeps its copy in policies/rules/props.py,
checked equal to these by the same test. The in-cluster daemons (agents/) ship
standalone in the agents image and carry their own copies, each a module constant checked equal to a name here.
"""

from __future__ import annotations

# --- Node labels: the cluster's own (kubelet `--node-labels` at join, components/planning/node_template.py).
OWN_PREFIX = "gpucluster.io"
"""The cluster's label namespace: a pool may not set labels in it (components/spec/consumer_rules.py)."""
LABEL_POOL = "gpucluster.io/pool"
LABEL_ROLE = "gpucluster.io/role"
LABEL_IB_DOMAIN = "gpucluster.io/infiniband-domain"
LABEL_RACK = "gpucluster.io/rack"
"""A rack pool's NVLink rack: its scale set (one interconnect subgroup)."""
LABEL_SCALE_SET = "gpucluster.io/scale-set"
"""Every node's own scale set: what the rollout controller selects a wave's nodes by."""
LABEL_INTERCONNECT_GROUP = "gpucluster.io/interconnect-group"
LABEL_INTERCONNECT_GROUP_ID = "gpucluster.io/interconnect-group-id"
"""A rack VM's interconnect group as IMDS reports it (components/bootstrap/rack.py)."""
LABEL_INTERCONNECT_SUBGROUP_ID = "gpucluster.io/interconnect-subgroup-id"
LABEL_TEAM = "gpucluster.io/team"
"""On a team's namespace; Kueue's queues select it."""
LABEL_POD_SECURITY_AUDIT = "pod-security.kubernetes.io/audit"
"""Pod Security admission's audit level on a namespace (k8s.io/pod-security-admission v0.36.4 api/constants.go
AuditLevelLabel)."""
LABEL_GPU_PRODUCT = "gpucluster.io/gpu-product"
"""Our product label, not `nvidia.com/gpu.product`: GPU feature discovery owns that key and overwrites it with the
NVML device name, spaces as dashes ("NVIDIA-H100-80GB-HBM3"; NVIDIA/k8s-device-plugin internal/lm/resource.go
`productLabel`), so a value we set there would differ between the autoscaler's template and the running node."""
LABEL_ADMISSION = "gpucluster.io/admission"
"""`open` on every node at join and required by every Kueue ResourceFlavor's nodeLabels; the rollout's fence sets it to
`fenced` (components/planning/rollout.py `FENCE`): no new admission there, no running gang touched."""
LABEL_CONFIDENTIAL = "gpucluster.io/confidential"
"""Also the confidential pools' taint key."""
LABEL_CC_MODE = "gpucluster.io/gpu-cc-mode"
LABEL_ATTESTATION = "gpucluster.io/gpu-attestation"
LABEL_NCCL_RUN = "gpucluster.io/nccl-run"
"""On the pods of one `gpucluster verify --nccl` run."""
LABEL_ACCELERATOR = "accelerator"

# --- Well-known Kubernetes node labels (k8s.io/api core/v1 well_known_labels.go).
LABEL_HOSTNAME = "kubernetes.io/hostname"
LABEL_OS = "kubernetes.io/os"
LABEL_ARCH = "kubernetes.io/arch"
LABEL_ZONE = "topology.kubernetes.io/zone"
LABEL_REGION = "topology.kubernetes.io/region"
LABEL_INSTANCE_TYPE = "node.kubernetes.io/instance-type"
LABEL_BETA_OS = "beta.kubernetes.io/os"
LABEL_BETA_ARCH = "beta.kubernetes.io/arch"
LABEL_BETA_INSTANCE_TYPE = "beta.kubernetes.io/instance-type"
LABEL_FAILURE_DOMAIN_ZONE = "failure-domain.beta.kubernetes.io/zone"
LABEL_FAILURE_DOMAIN_REGION = "failure-domain.beta.kubernetes.io/region"
LABEL_CONTROL_PLANE = "node-role.kubernetes.io/control-plane"
"""kubeadm's control-plane label, and the key of its taint."""
LABEL_MASTER_REMOVED = "node-role.kubernetes.io/master"
"""kubeadm's former control-plane label (no longer applied from 1.24) and taint (from 1.25): KEP-2067. Named only
to be found in what the plan renders (components/catalog/removals.py)."""
LABEL_EXCLUDE_FROM_LB = "node.kubernetes.io/exclude-from-external-load-balancers"
LABEL_NAMESPACE_NAME = "kubernetes.io/metadata.name"
"""Set by the API server on every namespace."""

# --- Labels of NVIDIA's and node-feature-discovery's components we set or select on.
GPU_RESOURCE = "nvidia.com/gpu"
"""The device plugin's extended resource (also a taint key the autoscaler's templates carry)."""
CHANNEL_RESOURCE = "compute-domain.nvidia.com/channel"
"""The IMEX channel a ComputeDomain pod claims, as Kueue counts it through deviceClassMappings (objects/kueue.py):
kueue v0.19.2 makes a workload whose claim names a DeviceClass without a deviceClassMappings entry inadmissible
("DeviceClass %s is not mapped in DRA configuration", pkg/dra/claims.go), and a mapped resource no resource group
covers is "unavailable in ClusterQueue" (flavorassigner.go)."""
RDMA_NIC_RESOURCE = "dra.net/nic"
"""An InfiniBand NIC a pod on a rack node claims through DRANET's DeviceClass, as Kueue counts it through
deviceClassMappings (objects/kueue.py, objects/rack_dra.py)."""
LABEL_DEPLOY_CONTAINER_TOOLKIT = "nvidia.com/gpu.deploy.container-toolkit"
LABEL_DEPLOY_DEVICE_PLUGIN = "nvidia.com/gpu.deploy.device-plugin"
LABEL_DEPLOY_DCGM = "nvidia.com/gpu.deploy.dcgm"
LABEL_DEPLOY_DCGM_EXPORTER = "nvidia.com/gpu.deploy.dcgm-exporter"
LABEL_DEPLOY_GFD = "nvidia.com/gpu.deploy.gpu-feature-discovery"
LABEL_DEPLOY_OPERATOR_VALIDATOR = "nvidia.com/gpu.deploy.operator-validator"
LABEL_NFD_NVIDIA_PCI = "feature.node.kubernetes.io/pci-10de.present"
LABEL_NFD_RDMA_CAPABLE = "feature.node.kubernetes.io/rdma.capable"
LABEL_NFD_RDMA_AVAILABLE = "feature.node.kubernetes.io/rdma.available"

# --- Workload labels (Kubernetes recommended labels, Job controller, Kueue).
LABEL_APP = "app.kubernetes.io/name"
LABEL_PART_OF = "app.kubernetes.io/part-of"
LABEL_COMPONENT = "app.kubernetes.io/component"
LABEL_JOB_NAME = "batch.kubernetes.io/job-name"
LABEL_JOB_CONTROLLER_UID = "batch.kubernetes.io/controller-uid"
LABEL_JOB_COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
LABEL_SERVICE_NAME = "kubernetes.io/service-name"
"""On an EndpointSlice: the Service it belongs to."""
LABEL_QUEUE = "kueue.x-k8s.io/queue-name"

# --- Taints.
TAINT_PREFLIGHT = "gpucluster.io/preflight"
"""Set at registration; the GPU health DaemonSet removes it once the node passes its checks."""
TAINT_UNHEALTHY = "gpucluster.io/gpu-unhealthy"
"""Set by the GPU health agent on a failed diagnostic or DCGM health watch (scripts/health_agent.py UNHEALTHY)."""
TAINT_RACK_UNPROVEN = "gpucluster.io/rack-unproven"
"""On a rack node whose GPU feature discovery clique does not bear out its planned rack label
(agents/rack_clique.py): no rack work lands there."""
LABEL_GPU_CLIQUE = "nvidia.com/gpu.clique"
"""GPU feature discovery's NVLink partition label, `<cluster UUID>.<clique id>` (NVIDIA/k8s-device-plugin v0.19.3
internal/lm/imex.go)."""
NODE_NAMESPACE = "node.kubernetes.io"
"""Kubelets may set labels under it; the node lifecycle controller's taints (`not-ready`, `unreachable`) live there."""

NODE_NAME_CLAIM = "authentication.kubernetes.io/node-name"
"""The node a pod's bound service-account token was issued on, as the API server hands it to admission in
`userInfo.extra` (ServiceAccountTokenPodNodeInfo: beta and on from Kubernetes 1.30, GA and locked on from 1.32;
kubernetes pkg/features/versioned_kube_features.go)."""

# --- Annotations.
ANNOTATION_SKIP_AWAIT = "pulumi.com/skipAwait"
ANNOTATION_API_CALLS = "gpucluster.io/api-calls-per-minute"
"""A node agent's steady API requests per pod per minute, read by the plan's load check."""
ANNOTATION_PROVISIONING_API = "gpucluster.io/provisioning-request-api"
ANNOTATION_REQUIRED_TOPOLOGY = "kueue.x-k8s.io/podset-required-topology"
ANNOTATION_PROMETHEUS_SCRAPE = "prometheus.io/scrape"
ANNOTATION_PROMETHEUS_PORT = "prometheus.io/port"
ANNOTATION_NODE_TTL = "node.alpha.kubernetes.io/ttl"
ANNOTATION_ATTACH_DETACH = "volumes.kubernetes.io/controller-managed-attach-detach"
ANNOTATION_CRI_SOCKET = "kubeadm.alpha.kubernetes.io/cri-socket"
ANNOTATION_CONFIG_DIGEST = "gpucluster.io/config-digest"
"""On a pod template: a digest of the config files its pods read at start, so a changed file rolls them."""
ANNOTATION_WATCH_REASON = "gpucluster.io/cluster-wide-watch-reason"
"""Read by the policy pack (policies/rules/kubernetes.py) on a workload that watches cluster-wide."""
ANNOTATION_SPARE_RACKS = "gpucluster.io/spare-racks-per-zone"
"""On a rack pool's ResourceFlavor: the stack's `racks.spareRacksPerZone`, the racks per zone the policy pack's
spare-rack rule keeps free of nominal quota (policies/rules/racks.py)."""
ANNOTATION_CHECKPOINT_BY = "gpucluster.io/checkpoint-by"
"""On a running pod of a fenced domain: the time (RFC 3339) after which the rollout evicts its workload whole; a job
reads it through a downward API volume and checkpoints before it."""
ANNOTATION_ROLLOUT_PAUSED = "gpucluster.io/rollout-paused"
"""On the rollout's plan ConfigMap: `true` stops the controller between steps (docs/operations.md)."""
ANNOTATION_FENCED_BY_ROLLOUT = "gpucluster.io/fenced-by-rollout"
"""On a node the rollout controller fenced: what it lifts, and only that."""
ANNOTATION_CORDONED_BY_ROLLOUT = "gpucluster.io/cordoned-by-rollout"
"""On a node the rollout controller also cordoned."""
ANNOTATION_DEACTIVATED_BY_ROLLOUT = "gpucluster.io/deactivated-by-rollout"
"""On a Workload the rollout controller deactivated: the wave's scale sets."""
LABEL_KUEUE_PODSET = "kueue.x-k8s.io/podset"
"""On a Kueue-managed pod: its pod set (Kueue sets it; the rollout's drain groups a gang's pods by it)."""
LABEL_KUEUE_JOB_UID = "kueue.x-k8s.io/job-uid"
"""On a Kueue-managed pod and its Workload: the owning job's UID (Kueue sets it)."""
LABEL_JOBSET_UID = "jobset.sigs.k8s.io/jobset-uid"
"""On a JobSet's pods: the JobSet's UID (the JobSet controller sets it)."""
ANNOTATION_MIRROR = "kubernetes.io/config.mirror"
"""On a static pod's mirror pod (the kubelet sets it): nothing to evict."""

# --- Other Kubernetes names used in more than one place.
SECRET_TYPE_BOOTSTRAP_TOKEN = "bootstrap.kubernetes.io/token"
SIGNER_KUBELET_SERVING = "kubernetes.io/kubelet-serving"
PROVISIONING_REQUEST_CONTROLLER = "kueue.x-k8s.io/provisioning-request"
"""Kueue's ProvisioningRequest admission check controller name."""

# --- Azure tags.
CLUSTER_TAG = "gpucluster-cluster"
ROLE_TAG = "gpucluster-role"
POOL_TAG = "gpucluster-pool"
INFINIBAND_TAG = "gpucluster-infiniband"
KUBERNETES_VERSION_TAG = "gpucluster-kubernetes-version"
KUBERNETES_EOL_TAG = "gpucluster-kubernetes-end-of-life"
"""On the API-server scale set: the version it runs and its minor's end-of-life date, from the version table
(components/catalog/versions.py), so the policy pack judges support from the preview alone."""
TEAM_TAG = "team"
COST_CENTRE_TAG = "cost-centre"
LIBRARY_TAG_PREFIX = "gpucluster-"
"""Tags the library writes; a stack's own tags may not start with it."""
AUTOSCALER_TAG_PREFIX = "k8s.io_cluster-autoscaler_"
AUTOSCALER_ENABLED_TAG = "cluster-autoscaler-enabled"
AUTOSCALER_NAME_TAG = "cluster-autoscaler-name"
AUTOSCALER_MIN_TAG = "min"
AUTOSCALER_MAX_TAG = "max"
AUTOSCALER_LABEL_TAG_PREFIX = "k8s.io_cluster-autoscaler_node-template_label_"
AUTOSCALER_TAINT_TAG_PREFIX = "k8s.io_cluster-autoscaler_node-template_taint_"
AUTOSCALER_RESOURCE_TAG_PREFIX = "k8s.io_cluster-autoscaler_node-template_resources_"


def autoscaler_tag_key(key: str) -> str:
    """Azure tag names cannot hold '/': the autoscaler reads '_' as '/' and '~2' as '_'
    (kubernetes/autoscaler cloudprovider/azure/azure_template.go)."""
    return key.replace("_", "~2").replace("/", "_")


AUTOSCALER_GPUS_TAG = AUTOSCALER_RESOURCE_TAG_PREFIX + autoscaler_tag_key(GPU_RESOURCE)
"""The scale-from-zero template's GPUs per node; every node pool sets it."""
