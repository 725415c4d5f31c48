"""Kueue objects (kueue.x-k8s.io/v1beta2) and the controller's Configuration, from the scheduling plan."""

from __future__ import annotations

from typing import Any

import yaml

from gpucluster.catalog.in_cluster import (
    KUEUE_IMAGE,
    KUEUE_VERSION,
    RDMA_RESOURCE,
)
from gpucluster.kubernetes.objects.common import Object, obj, on_system_nodes, toleration
from gpucluster.kubernetes.objects.rack_dra import DRANET_DEVICE_CLASS
from gpucluster.kubernetes.objects.rack_gangs import rack_gang_policy
from gpucluster.kubernetes.objects.team_pods import team_pod_policy
from gpucluster.planning.scheduling import (
    RACK_TOPOLOGY_LEVELS,
    RACK_TOPOLOGY_NAME,
    TOPOLOGY_LEVELS,
    TOPOLOGY_NAME,
    FlavorPlan,
    SchedulingPlan,
    TeamQueuePlan,
)
from gpucluster.spec import Quota
from gpucluster.vocabulary import (
    ANNOTATION_PROVISIONING_API,
    ANNOTATION_SPARE_RACKS,
    CHANNEL_RESOURCE,
    GPU_RESOURCE,
    LABEL_NAMESPACE_NAME,
    LABEL_POD_SECURITY_AUDIT,
    LABEL_TEAM,
    PROVISIONING_REQUEST_CONTROLLER,
    RDMA_NIC_RESOURCE,
)

API = "kueue.x-k8s.io/v1beta2"
RESOURCES = ("cpu", "memory", GPU_RESOURCE)
PROVISIONING_CHECK = "ib-capacity"
"""The AdmissionCheck (and its ProvisioningRequestConfig) that asks cluster-autoscaler for the nodes of a gang."""
PROVISIONING_CONTROLLER = PROVISIONING_REQUEST_CONTROLLER
ATOMIC_SCALE_UP = "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
"""cluster-autoscaler 1.36.1 FAQ.md "Supported ProvisioningClasses": scales one node group up for all the pods it
cannot place on existing nodes, all or nothing where the cloud provider can; `check-capacity` only checks and would
never bring a pool up from zero."""
KUEUE_REPLICAS = 2
COMPUTE_DOMAIN_CHANNEL_CLASS = "compute-domain-default-channel.nvidia.com"
"""The DeviceClass a ComputeDomain's ResourceClaimTemplate asks its IMEX channel of (kubernetes-sigs/
dra-driver-nvidia-gpu v25.12.0 deployments/helm/nvidia-dra-driver-gpu/templates/
deviceclass-compute-domain-default-channel.yaml)."""


def topology(name: str = TOPOLOGY_NAME, levels: tuple[str, ...] = TOPOLOGY_LEVELS) -> Object:
    return obj(API, "Topology", name, spec={"levels": [{"nodeLabel": label} for label in levels]})


def topologies(plan: SchedulingPlan) -> list[Object]:
    """The cluster's `infiniband` topology, and the `nvlink` one when a rack pool's flavor names it."""
    found = [topology()]
    if any(f.topology == RACK_TOPOLOGY_NAME for f in plan.flavors):
        found.append(topology(RACK_TOPOLOGY_NAME, RACK_TOPOLOGY_LEVELS))
    return found


def resource_flavor(flavor: FlavorPlan) -> Object:
    spec: dict[str, Any] = {"nodeLabels": dict(flavor.node_labels)}
    if flavor.node_taints:
        spec["nodeTaints"] = [{"key": t.key, "value": t.value, "effect": t.effect} for t in flavor.node_taints]
    if flavor.tolerations:
        spec["tolerations"] = [toleration(t) for t in flavor.tolerations]
    if flavor.topology:
        spec["topologyName"] = flavor.topology
    found = obj(API, "ResourceFlavor", flavor.name, spec=spec)
    if flavor.pool.racks is not None:
        found["metadata"]["annotations"] = {ANNOTATION_SPARE_RACKS: str(flavor.pool.racks.spare_racks_per_zone)}
    return found


def cohort(plan: SchedulingPlan) -> Object:
    """The root of every team queue: unused quota of one team is lent to the others by fair share."""
    return obj(API, "Cohort", plan.cohort, spec={})


def _amounts(quota: Quota) -> dict[str, int | str]:
    return {"cpu": quota.cpus, "memory": f"{quota.memory_gib}Gi", GPU_RESOURCE: quota.gpus}


def _resources(nominal: Quota, borrowing: Quota | None, lending: Quota | None) -> list[dict[str, Any]]:
    rows = []
    for name in RESOURCES:
        row: dict[str, Any] = {"name": name, "nominalQuota": _amounts(nominal)[name]}
        if borrowing is not None:
            row["borrowingLimit"] = _amounts(borrowing)[name]
        if lending is not None:
            row["lendingLimit"] = _amounts(lending)[name]
        rows.append(row)
    return rows


def provisioning_objects() -> list[Object]:
    """kueue v0.19.2 site/content/en/docs/concepts/admission_check/provisioning_request.md: an AdmissionCheck with
    controllerName kueue.x-k8s.io/provisioning-request whose parameters name a ProvisioningRequestConfig. Kueue makes
    one ProvisioningRequest per admitted-by-quota workload, with its pod templates and the flavor's node selectors
    (pkg/controller/admissionchecks/provisioning createPodTemplate); the autoscaler answers Provisioned."""
    return [
        obj(API, "ProvisioningRequestConfig", PROVISIONING_CHECK, spec={
            "provisioningClassName": ATOMIC_SCALE_UP,
            "managedResources": [GPU_RESOURCE],
            # A gang's identical pods become one pod template with a count.
            "podSetMergePolicy": "IdenticalWorkloadSchedulingRequirements",
            "retryStrategy": {"backoffLimitCount": 3, "backoffBaseSeconds": 60, "backoffMaxSeconds": 1800}}),
        obj(API, "AdmissionCheck", PROVISIONING_CHECK, spec={
            "controllerName": PROVISIONING_CONTROLLER,
            "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "ProvisioningRequestConfig",
                           "name": PROVISIONING_CHECK}}),
    ]


def _provisioned_flavors(plan: SchedulingPlan, team: TeamQueuePlan) -> list[str]:
    scaling = {f.name for f in plan.flavors if f.scales_below_demand}
    return [f.flavor for f in team.flavors if f.flavor in scaling]


def _rack_group(plan: SchedulingPlan, team: TeamQueuePlan) -> dict[str, Any]:
    group: dict[str, Any] = {
        "coveredResources": list(RESOURCES),
        "flavors": [{"name": f.flavor, "resources": _resources(f.nominal, f.borrowing_limit, f.lending_limit)}
                    for f in team.flavors],
    }
    return _with_channels(plan, group, team) if has_racks(plan) else group


def has_racks(plan: SchedulingPlan) -> bool:
    return any(f.pool.racks is not None for f in plan.flavors)


def _with_channels(plan: SchedulingPlan, group: dict[str, Any], team: TeamQueuePlan) -> dict[str, Any]:
    """ComputeDomain channels per node of quota on rack flavors: NVIDIA's DRA driver 25.12.0 offers one channel per
    node (objects/rack_gangs.py), so a rack gang runs one pod per node and a node is one channel. DRANET InfiniBand
    NICs per GPU (a GB300 or GB200 VM has 4 GPUs and 4 InfiniBand NICs: nd-gb300-v6-series.md; kubernetes-sigs/dranet
    v1.4.0 examples/azure_aks_examples/gb300/README.md). None of either elsewhere."""
    per_node = {f.name: f.pool.size.gpus for f in plan.flavors if f.pool.racks is not None}
    gpus = {f.flavor: f.nominal.gpus for f in team.flavors}
    quota = {CHANNEL_RESOURCE: lambda name: gpus[name] // per_node[name], RDMA_NIC_RESOURCE: lambda name: gpus[name]}
    for resource, nominal in quota.items():
        group["coveredResources"].append(resource)
        for flavor in group["flavors"]:
            name = flavor["name"]
            flavor["resources"].append({"name": resource, "nominalQuota": nominal(name) if name in per_node else 0})
    return group


def cluster_queue(plan: SchedulingPlan, team: TeamQueuePlan) -> Object:
    checks = _provisioned_flavors(plan, team)
    strategy = ({"admissionChecksStrategy": {"admissionChecks": [{"name": PROVISIONING_CHECK, "onFlavors": checks}]}}
                if checks else {})
    return obj(API, "ClusterQueue", team.name, labels={LABEL_TEAM: team.name}, spec={
        **strategy,
        "cohortName": plan.cohort,
        "namespaceSelector": {"matchLabels": {LABEL_NAMESPACE_NAME: team.namespace}},
        "queueingStrategy": "BestEffortFIFO",
        "resourceGroups": [_rack_group(plan, team)],
        "fairSharing": {"weight": team.weight},
        # Under fair sharing Kueue ignores borrowWithinCohort (Kueue docs, concepts/preemption "Fair Sharing"):
        # borrowing is decided by fair share alone. A team borrows idle quota up to its borrowingLimit; the
        # owner takes it back (reclaimWithinCohort), and between borrowers the lower share wins.
        "preemption": {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"},
    })


def team_namespace(team: TeamQueuePlan) -> Object:
    """Pod Security admission audits at `baseline` (its `pod-security.kubernetes.io/audit` label): enforcing is the
    team-pod policy's (objects/team_pods.py), which is baseline with IPC_LOCK allowed."""
    return obj("v1", "Namespace", team.namespace, labels={LABEL_TEAM: team.name, LABEL_POD_SECURITY_AUDIT: "baseline"})


def local_queue(team: TeamQueuePlan) -> Object:
    return obj(API, "LocalQueue", team.name, team.namespace, labels={LABEL_TEAM: team.name},
               spec={"clusterQueue": team.name})


DEFAULT_QUEUE = "default"
"""Kueue's default LocalQueue name (kueue v0.19.2 pkg/controller/constants/constants.go DefaultLocalQueueName): its
job webhooks give a job without `kueue.x-k8s.io/queue-name` this queue when the namespace has one
(pkg/controller/jobframework/defaults.go ApplyDefaultLocalQueue)."""


def default_queue(team: TeamQueuePlan) -> list[Object]:
    """A second LocalQueue named `default` on the team's ClusterQueue: a job that names no queue is queued and counted
    against the team's quota instead of starting outside it (with manageJobsWithoutQueueName, one that still has
    no queue stays suspended)."""
    if team.name == DEFAULT_QUEUE:  # the team's own queue is already the namespace's default
        return []
    return [obj(API, "LocalQueue", DEFAULT_QUEUE, team.namespace, labels={LABEL_TEAM: team.name},
                spec={"clusterQueue": team.name})]


def kueue_objects(plan: SchedulingPlan) -> list[Object]:
    """Custom resources, in an order `kubectl apply` accepts (referenced objects first)."""
    provisioning = provisioning_objects() if any(f.scales_below_demand for f in plan.flavors) else []
    objects = [*topologies(plan), *(resource_flavor(f) for f in plan.flavors), cohort(plan), *provisioning]
    for team in plan.teams:
        objects += [cluster_queue(plan, team), team_namespace(team), local_queue(team), *default_queue(team)]
    return [*objects, *(team_pod_policy() if plan.teams else ()), *rack_gang_policy(plan)]


CHART_CONCURRENCY = {"Job.batch": 5, "Pod": 5, "Workload.kueue.x-k8s.io": 10, "LocalQueue.kueue.x-k8s.io": 5,
                     "ClusterQueue.kueue.x-k8s.io": 5, "ResourceFlavor.kueue.x-k8s.io": 1}
"""controller.groupKindConcurrency of the v0.19.2 chart's default manager config (charts/kueue/values.yaml)."""
DEFAULT_QPS, DEFAULT_BURST = 300, 500
"""Kueue v0.19.2 client defaults (apis/config/v1beta2/defaults.go), also the chart's values."""
SCALE = 2
"""Thousands of workloads at 7,500 nodes: twice the defaults' client throughput and reconcile workers."""


MANAGED_NAMESPACES = {"matchExpressions": [{"key": LABEL_TEAM, "operator": "Exists"}]}
"""Kueue manages the team namespaces only (`managedJobsNamespaceSelector`). The chart makes it the namespaceSelector
of its job and pod webhooks, which fail closed (failurePolicy Fail, kueue v0.19.2 charts/kueue/templates/webhook/
manifests.yaml mjob.kb.io, mpod.kb.io): on any other namespace, while Kueue's controller is down, the GPU operator's
pre-upgrade hook Job (gpu-operator v26.3.3 templates/upgrade_crd.yaml), every health recheck Job (objects/health.py
CronJob) and every platform pod would be refused, and a pod in a namespace with no LocalQueue would stay gated for
good. Workloads belong in team namespaces; anything else is the platform's or a cluster admin's."""


def kueue_configuration(pods_ready_timeout_minutes: int, racks: bool = False) -> dict[str, Any]:
    """config.kueue.x-k8s.io/v1beta2 Configuration: the chart's default config (the chart replaces it whole
    with this value) raised for scale, fair sharing on, all-or-nothing admission for gangs."""
    return {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "health": {"healthProbeBindAddress": ":8081"},
        "metrics": {"bindAddress": ":8443", "enableClusterQueueResources": True},
        "webhook": {"port": 9443},
        "leaderElection": {"leaderElect": True, "resourceName": "c1f6bfd2.kueue.x-k8s.io"},
        "controller": {"groupKindConcurrency": {kind: n * SCALE for kind, n in CHART_CONCURRENCY.items()}},
        "clientConnection": {"qps": DEFAULT_QPS * SCALE, "burst": DEFAULT_BURST * SCALE},
        # The chart gives this selector to its job and pod webhooks as their namespaceSelector (templates/webhook/
        # manifests.yaml `hasKey $managerConfig "managedJobsNamespaceSelector"`); the controller also leaves jobs
        # outside it alone unless they name a queue (apis/config/v1beta2 configuration_types.go).
        "managedJobsNamespaceSelector": MANAGED_NAMESPACES,
        # A job in a team namespace without a queue name is Kueue's, not free to start outside the team's quota
        # (apis/config/v1beta2 configuration_types.go: "suspended and never started unless they are assigned a
        # queue"); the namespace's `default` LocalQueue gives it the team's queue (default_queue below).
        "manageJobsWithoutQueueName": True,
        # All-or-nothing: an admitted workload whose pods are not all ready in time is evicted and requeued
        # (Kueue docs, tasks/manage/setup_wait_for_pods_ready). Admission is not serialised (blockAdmission):
        # topology-aware admission already reserves real nodes for every pod of a gang (docs/scheduling.md).
        "waitForPodsReady": {
            "timeout": f"{pods_ready_timeout_minutes}m",
            "blockAdmission": False,
            "requeuingStrategy": {"timestamp": "Eviction", "backoffBaseSeconds": 60, "backoffMaxSeconds": 3600},
        },
        # `pod`: a bare pod, or a Deployment's or StatefulSet's pods, in a team namespace is Kueue's too, so the
        # team's quota cannot be bypassed by leaving out the Job (v0.19.2 pkg/controller/jobs/pod/pod_webhook.go
        # Default: a pod whose ancestor is a Kueue-managed job is left to that job; any other gets the `default`
        # LocalQueue and the `kueue.x-k8s.io/admission` scheduling gate). The chart's mpod.kb.io webhook then fails
        # closed on the namespaces managedJobsNamespaceSelector covers: the team namespaces only.
        "integrations": {"frameworks": ["batch/job", "jobset.x-k8s.io/jobset", "kubeflow.org/pytorchjob",
                                        "kubeflow.org/mpijob", "trainer.kubeflow.org/trainjob", "pod"]},
        "fairSharing": {"preemptionStrategies": ["LessThanOrEqualToFinalShare", "LessThanInitialShare"]},
        # A gang's pods ask for the node's InfiniBand HCAs (objects/rdma.py). No ClusterQueue covers that resource,
        # and a requested resource no resource group covers makes the workload inadmissible ("resource %s
        # unavailable in ClusterQueue", kueue v0.19.2 pkg/scheduler/flavorassigner/flavorassigner.go): it is not
        # quota, so Kueue ignores it (apis/config/v1beta2 Resources.excludeResourcePrefixes).
        "resources": {"excludeResourcePrefixes": [RDMA_RESOURCE.split("/")[0] + "/"],
                      # ComputeDomain channels and DRANET's NICs on rack pools (apis/config/v1beta2
                      # Resources.deviceClassMappings). DRA requests are added after excludeResourcePrefixes is
                      # applied (pkg/workload/workload.go totalRequestsFromPodSets): a NIC claim needs its mapping
                      # and a covered resource like the channel.
                      **({"deviceClassMappings": [
                          {"name": CHANNEL_RESOURCE, "deviceClassNames": [COMPUTE_DOMAIN_CHANNEL_CLASS]},
                          {"name": RDMA_NIC_RESOURCE, "deviceClassNames": [DRANET_DEVICE_CLASS]}]}
                         if racks else {})},
    }




def kueue_chart_values(pods_ready_timeout_minutes: int, provisioning_api: str = "", racks: bool = False
                       ) -> dict[str, Any]:
    """`provisioning_api`: where the ProvisioningRequest CRD comes from. Kueue sets up its provisioning controller
    only if that API is served when it starts (v0.19.2 cmd/kueue/main.go), and a ClusterQueue whose AdmissionCheck is
    not Active is inactive (site/content/en/docs/concepts/admission_check): admits nothing. The annotation rolls
    Kueue's pods (the template's podAnnotations, charts/kueue/templates/manager/manager.yaml) when it first appears
    and whenever the CRD changes, after the CRD is applied (the release depends on it), so a Kueue that started
    before the API existed does not keep every queue inactive."""
    placement = on_system_nodes("kueue")
    annotations = {ANNOTATION_PROVISIONING_API: provisioning_api} if provisioning_api else {}
    return {
        "controllerManager": {
            "replicas": KUEUE_REPLICAS,
            "manager": {
                **({"podAnnotations": annotations} if annotations else {}),
                "image": {"repository": KUEUE_IMAGE, "tag": f"v{KUEUE_VERSION}", "pullPolicy": "IfNotPresent"},
                "priorityClassName": placement["priorityClassName"],
                "resources": {"requests": {"cpu": "2", "memory": "4Gi"}, "limits": {"cpu": "4", "memory": "8Gi"}},
            },
            "nodeSelector": placement["nodeSelector"],
            # The chart's pods carry app.kubernetes.io/name: kueue.
            "topologySpreadConstraints": placement["topologySpreadConstraints"],
            "podDisruptionBudget": {"enabled": True, "minAvailable": 1},
        },
        "managerConfig": {"controllerManagerConfigYaml": yaml.safe_dump(
            kueue_configuration(pods_ready_timeout_minutes, racks), sort_keys=False)},
    }
