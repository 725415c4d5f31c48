"""The gang shapes NVIDIA's DRA driver 25.12.0 can serve on NVLink racks, enforced where Kueue sees a gang first.

The driver's kubelet plugin publishes one IMEX channel device per node for ComputeDomains: `channel-<id>` devices
with an `id` attribute (kubernetes-sigs/dra-driver-nvidia-gpu v25.12.0 cmd/compute-domain-kubelet-plugin/
deviceinfo.go `ComputeDomainChannelInfo`), and the only channel DeviceClass selects `id == 0` (deployments/helm/
nvidia-dra-driver-gpu/templates/deviceclass-compute-domain-default-channel.yaml): one claimable channel per node.
Each pod's claim comes from the ComputeDomain's per-pod ResourceClaimTemplate, so a second pod of the same domain on
a node waits for a channel that never frees. Kueue v0.19.2's TAS places pods by their pod-spec requests only
(pkg/scheduler/flavorassigner/tas_flavorassigner.go podSetTopologyRequest), i.e. by `nvidia.com/gpu`: a pod smaller
than a node is packed beside others of its gang, which then stay Pending (kubernetes-sigs/dra-driver-nvidia-gpu#309,
an evict-and-requeue loop under waitForPodsReady).

So a PodSet that requires one rack (`kueue.x-k8s.io/podset-required-topology: gpucluster.io/rack`, Kueue's
`spec.podSets[].topologyRequest.required`, apis/kueue/v1beta2/workload_types.go) and carries a resource claim must
ask for a whole node's GPUs in each pod: one pod per node, one channel per pod. A ValidatingAdmissionPolicy on
Kueue's Workload refuses other shapes before any quota is taken; the Job stays suspended with the message as its
event. Pods that need no rack-wide NVLink (no required rack level) are not judged here.
"""

from __future__ import annotations

from gpucluster.kubernetes.objects.common import Object, obj
from gpucluster.planning.scheduling import SchedulingPlan
from gpucluster.vocabulary import GPU_RESOURCE, LABEL_RACK

POLICY = "gpucluster-rack-gang-shape"


def rack_node_gpus(plan: SchedulingPlan) -> list[int]:
    return sorted({f.pool.size.gpus for f in plan.flavors if f.pool.racks is not None})


def _gpus(container: str, where: str) -> str:
    return (f"(has({container}.resources) && has({container}.resources.{where}) && "
            f"'{GPU_RESOURCE}' in {container}.resources.{where})")


def _shape_ok(gpus: list[int]) -> str:
    """CEL over one PodSet `p`: not a rack gang with claims, or exactly one container asks for GPUs and it asks for a
    whole node's (requests, else limits: the API server copies limits into absent extended-resource requests only on
    Pods, and a Workload's template is as written)."""
    wanted = ", ".join(f"'{n}'" for n in gpus)
    count = (f"(({_gpus('c', 'requests')}) ? string(c.resources.requests['{GPU_RESOURCE}']) : "
             f"(({_gpus('c', 'limits')}) ? string(c.resources.limits['{GPU_RESOURCE}']) : '0'))")
    rack_gang = (f"has(p.topologyRequest) && has(p.topologyRequest.required) && p.topologyRequest.required == "
                 f"'{LABEL_RACK}' && has(p.template.spec.resourceClaims) && size(p.template.spec.resourceClaims) > 0")
    return (f"!({rack_gang}) || (p.template.spec.containers.filter(c, {count} != '0').size() == 1 && "
            f"p.template.spec.containers.all(c, {count} == '0' || {count} in [{wanted}]))")


def rack_gang_policy(plan: SchedulingPlan) -> list[Object]:
    gpus = rack_node_gpus(plan)
    if not gpus:
        return []
    per_node = " or ".join(str(n) for n in gpus)
    policy = obj("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy", POLICY, spec={
        "failurePolicy": "Fail",
        "matchConstraints": {"resourceRules": [{"apiGroups": ["kueue.x-k8s.io"], "apiVersions": ["v1beta2"],
                                                "operations": ["CREATE", "UPDATE"], "resources": ["workloads"]}]},
        "validations": [{
            "expression": f"object.spec.podSets.all(p, {_shape_ok(gpus)})",
            "message": f"a PodSet that requires one rack ({LABEL_RACK}) and claims a ComputeDomain channel must run "
                       f"one pod per node with {per_node} {GPU_RESOURCE} in one container: NVIDIA's DRA driver "
                       "25.12.0 offers one IMEX channel per node and Kueue packs pods by GPUs, so smaller pods of "
                       "one gang would wait on a node's only channel (docs/rack-scale.md, \"Gang shapes\")",
        }]})
    binding = obj("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBinding", POLICY, spec={
        "policyName": POLICY, "validationActions": ["Deny"]})
    return [policy, binding]
