"""A gang is admitted onto a topology-aware pool the autoscaler has shrunk to zero: Kueue asks cluster-autoscaler for
the nodes through the ProvisioningRequest admission check, and the autoscaler answers.

Rules: kueue v0.19.2 site/content/en/docs/concepts/topology_aware_scheduling.md ("ClusterAutoscaler support") and
concepts/admission_check/provisioning_request.md (AdmissionCheck controllerName kueue.x-k8s.io/provisioning-request,
ProvisioningRequestConfig, ClusterQueue admissionChecksStrategy); kubernetes/autoscaler cluster-autoscaler-1.36.1
cluster-autoscaler/FAQ.md ("Enabling ProvisioningRequest Support": --enable-provisioning-requests=true, RBAC, the
CRD; "Supported ProvisioningClasses"); kueue v0.19.2 cmd/kueue/main.go (the provisioning controller starts only if
the ProvisioningRequest API is served when Kueue starts)."""

from __future__ import annotations

from typing import Any

import pytest

from gpucluster.catalog.in_cluster import provisioning_request_crd
from gpucluster.errors import SpecError
from gpucluster.kubernetes.objects.kueue import ATOMIC_SCALE_UP, PROVISIONING_CHECK
from gpucluster.kubernetes.objects.layer import layer_objects
from gpucluster.offline.engine import ProgramRun
from gpucluster.planning.cluster_plan import ClusterPlan
from gpucluster.planning.scale_from_zero import scale_from_zero_problems
from gpucluster.simulation.bring_up_layer import bring_up
from gpucluster.simulation.check import plan_checked
from tests.support.stacks import stack_spec


@pytest.fixture(scope="module")
def prod() -> ClusterPlan:
    return plan_checked(stack_spec("prod"))


def _bounds(plan: ClusterPlan) -> dict[str, tuple[int, int]]:
    return {p.name: (p.spec.min_count, p.nodes) for p in plan.pools}


def _earlier(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The objects as the layer rendered them before: no check, queues without a strategy, no autoscaler flag."""
    kept = [o for o in objects if o["kind"] not in ("AdmissionCheck", "ProvisioningRequestConfig")]
    for o in kept:
        if o["kind"] == "ClusterQueue":
            o["spec"].pop("admissionChecksStrategy", None)
    return kept


def test_the_h100_pool_at_zero_stays_at_zero_without_the_check(prod: ClusterPlan) -> None:
    """prod's H100 pool has minCount 0 (the scale sets' `min` tags): with the earlier objects every team's gangs on it
    are stuck, and the plan fails naming the flavor, the queue and why."""
    h100 = next(p for p in prod.pools if p.name == "h100")
    assert h100.spec.min_count == 0 and h100.infiniband
    with pytest.raises(SpecError) as error:
        bring_up(prod, objects=_earlier(layer_objects(prod)))
    lines = [p.message for p in error.value.problems if p.message.startswith("gangs on flavor h100")]
    assert lines and all("no ProvisioningRequest admission check covers it" in line for line in lines)
    assert any("ClusterQueue pretraining places gangs topology-aware on pool h100, which the autoscaler may shrink "
               "to 0 of 3,125 nodes" in line for line in lines)


def test_each_missing_piece_is_named(prod: ClusterPlan) -> None:
    bounds = _bounds(prod)
    objects = layer_objects(prod)
    config = next(o for o in objects if o["kind"] == "ProvisioningRequestConfig")
    config["spec"]["provisioningClassName"] = "check-capacity.autoscaling.x-k8s.io"
    [(_, reason), *_] = scale_from_zero_problems(objects, bounds)
    assert "its class check-capacity.autoscaling.x-k8s.io does not scale a node group up" in reason
    objects = layer_objects(prod)
    scaler = next(o for o in objects if o["kind"] == "Deployment" and o["metadata"]["name"] == "cluster-autoscaler")
    args = scaler["spec"]["template"]["spec"]["containers"][0]["args"]
    args.remove("--enable-provisioning-requests=true")
    [(_, reason), *_] = scale_from_zero_problems(objects, bounds)
    assert reason.startswith("ClusterQueue") and "cluster-autoscaler runs without --enable-provisioning-requests" in reason
    objects = layer_objects(prod)
    role = next(o for o in objects if o["kind"] == "ClusterRole" and o["metadata"]["name"] == "cluster-autoscaler")
    role["rules"] = [r for r in role["rules"] if r["apiGroups"] != ["autoscaling.x-k8s.io"]]
    [(_, reason), *_] = scale_from_zero_problems(objects, bounds)
    assert "cluster-autoscaler's role lacks provisioningrequests list" in reason


def test_the_shipped_objects_scale_the_pool_up(prod: ClusterPlan) -> None:
    objects = layer_objects(prod)
    assert scale_from_zero_problems(objects, _bounds(prod)) == []
    check = next(o for o in objects if o["kind"] == "AdmissionCheck")
    config = next(o for o in objects if o["kind"] == "ProvisioningRequestConfig")
    assert check["spec"]["controllerName"] == "kueue.x-k8s.io/provisioning-request"
    assert check["spec"]["parameters"] == {"apiGroup": "kueue.x-k8s.io", "kind": "ProvisioningRequestConfig",
                                           "name": PROVISIONING_CHECK}
    assert config["spec"]["provisioningClassName"] == ATOMIC_SCALE_UP
    queues = [o for o in objects if o["kind"] == "ClusterQueue"]
    # Only topology-aware flavors the autoscaler may shrink: h100, not the CPU or confidential pools.
    assert {f for q in queues for rule in q["spec"].get("admissionChecksStrategy", {}).get("admissionChecks", [])
            for f in rule["onFlavors"]} == {"h100"}


def test_dev_declares_no_check_without_a_topology_aware_pool() -> None:
    """dev's T4 pool has no InfiniBand, so no topology: Kueue admits by quota, unschedulable pods are pending, and
    the autoscaler scales up for them as for any pod."""
    plan = plan_checked(stack_spec("dev"))
    assert not [o for o in layer_objects(plan) if o["kind"] in ("AdmissionCheck", "ProvisioningRequestConfig")]


def test_the_crd_is_applied_before_kueue_and_the_autoscaler(prod_run: ProgramRun) -> None:
    [crd] = [r for r in prod_run.registrations if r.type == "kubernetes:yaml/v2:ConfigFile"]
    assert crd.inputs["file"] == provisioning_request_crd("1.36") and "cluster-autoscaler-1.36.1/" in crd.inputs["file"]
    kueue = next(r for r in prod_run.registrations if r.type == "kubernetes:helm.sh/v3:Release"
                 and r.inputs["name"] == "kueue")
    assert crd.urn in kueue.dependencies
    autoscaler = next(r for r in prod_run.registrations if r.type == "kubernetes:apps/v1:Deployment"
                      and r.name.endswith("cluster-autoscaler"))
    assert crd.urn in autoscaler.dependencies


def test_kueue_restarts_once_the_api_is_served(prod_run: ProgramRun) -> None:
    """A ClusterQueue whose AdmissionCheck is not Active is inactive (kueue v0.19.2 site/content/en/docs/concepts/
    admission_check), and the check is Active only if Kueue found the ProvisioningRequest API when it started: the
    release's pod annotation names the CRD, so Kueue's pods roll after it is applied (on a cluster where Kueue ran
    before it, too)."""
    from gpucluster.vocabulary import ANNOTATION_PROVISIONING_API
    kueue = next(r for r in prod_run.registrations if r.type == "kubernetes:helm.sh/v3:Release"
                 and r.inputs["name"] == "kueue")
    annotations = kueue.inputs["values"]["controllerManager"]["manager"]["podAnnotations"]
    assert annotations == {ANNOTATION_PROVISIONING_API: provisioning_request_crd("1.36")}
