"""Rack pools' DRA drivers as the gb300 program declares them: NVIDIA's DRA driver for ComputeDomains and DRANET, at
the pinned versions, from the cluster's registry, on rack nodes only; dev and prod declare neither.

Sources (each value relied on):
- kubernetes-sigs/dra-driver-nvidia-gpu v25.12.0 deployments/helm/nvidia-dra-driver-gpu: Chart.yaml (`name:
  nvidia-dra-driver-gpu`, `version: "25.12.0"`), values.yaml (`image.repository: nvcr.io/nvidia/k8s-dra-driver-gpu`,
  tag defaulting to `v` + appVersion; `resources.gpus.enabled`, `resources.computeDomains.enabled`,
  `nvidiaDriverRoot`; `controller.affinity` defaulting to control-plane nodes; `kubeletPlugin.affinity` defaulting to
  NFD's NVIDIA PCI label), templates/controller.yaml and kubeletplugin.yaml (`nodeSelector`, `affinity`,
  `tolerations` from those values); tests/bats/setup_suite.bash (`helm repo add nvidia
  https://helm.ngc.nvidia.com/nvidia`).
- kubernetes-sigs/dranet v1.4.0: README.md (`oci://registry.k8s.io/networking/charts/dranet`), Makefile (chart
  version = tag without `v`), deployments/helm/dranet/values.yaml (`image.repository:
  registry.k8s.io/networking/dranet`, `affinity`, `tolerations`, `args`), values.schema.json (`additionalProperties:
  false`), examples/distributed_training/device-class.yaml (DeviceClass `dranet.net`, `device.driver == "dra.net"`).
- Node affinity: k8s.io/api core/v1 NodeSelector ("The terms are ORed"; a term's expressions are ANDed);
  tolerations: k8s.io/api core/v1 Toleration (empty key with Exists matches every taint; empty effect every effect).
- Kueue v0.19.2 pkg/dra/claims.go (an unmapped DeviceClass is refused) and pkg/workload/workload.go
  totalRequestsFromPodSets (DRA resources added after excludeResourcePrefixes), through tests/test_rack_admission.py's
  model.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from gpucluster.catalog.in_cluster import DRA_DRIVER_NAMESPACE
from gpucluster.catalog.versions import DRA_DRIVER, DRANET, RACK_ADDONS
from gpucluster.kubernetes.objects.kueue import kueue_configuration
from gpucluster.kubernetes.objects.rack_dra import DRANET_DEVICE_CLASS
from gpucluster.offline.engine import ProgramRun
from gpucluster.offline.policy_runner import run_policies
from gpucluster.offline.preview import preview_document
from gpucluster.planning.cluster_plan import ClusterPlan, plan_cluster
from gpucluster.planning.registry import cluster_upstream_images
from tests.support.kueue_admission import TOLERATE_GPU, Gang, InadmissibleError, admit, rack_nodes, rack_objects, racks_of
from tests.support.stacks import ROOT, stack_spec

RELEASE = "kubernetes:helm.sh/v3:Release"
DEVICE_CLASS = "kubernetes:resource.k8s.io/v1:DeviceClass"
DRA_CHART, DRANET_CHART = "nvidia-dra-driver-gpu", "dranet"
DRA_IMAGE, DRANET_IMAGE = "nvcr.io/nvidia/k8s-dra-driver-gpu", "registry.k8s.io/networking/dranet"
NFD_DEFAULT_TERM = {"matchExpressions": [
    {"key": "feature.node.kubernetes.io/pci-10de.present", "operator": "In", "values": ["true"]}]}
"""The chart's first default kubelet-plugin term (values.yaml kubeletPlugin.affinity): every NVIDIA GPU node."""


@pytest.fixture(scope="module")
def gb300_plan() -> ClusterPlan:
    return plan_cluster(stack_spec("gb300"))


def _releases(run: ProgramRun) -> dict[str, dict[str, Any]]:
    return {r.inputs["name"]: r.inputs for r in run.registrations if r.type == RELEASE}


def _matches(term: dict[str, Any], labels: dict[str, str]) -> bool:
    def one(e: dict[str, Any]) -> bool:
        op, key = e["operator"], e["key"]
        return {"In": lambda: labels.get(key) in e["values"], "NotIn": lambda: labels.get(key) not in e["values"],
                "Exists": lambda: key in labels, "DoesNotExist": lambda: key not in labels}[op]()
    return all(one(e) for e in term.get("matchExpressions", []))


def _selects(pod: dict[str, Any], labels: dict[str, str]) -> bool:
    """nodeSelector AND required node affinity (terms ORed), as kube-scheduler's NodeAffinity plugin reads them."""
    if any(labels.get(k) != v for k, v in (pod.get("nodeSelector") or {}).items()):
        return False
    terms = (((pod.get("affinity") or {}).get("nodeAffinity") or {})
             .get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms")
    return terms is None or any(_matches(t, labels) for t in terms)


def _tolerates(tolerations: list[dict[str, Any]], taint: dict[str, str]) -> bool:
    return any((not t.get("key") and t.get("operator") == "Exists") or (
        t.get("key") == taint["key"] and t.get("effect") in (None, "", taint["effect"])
        and (t.get("operator") == "Exists" or t.get("value") == taint["value"])) for t in tolerations)


def _pools_selected(plan: ClusterPlan, pod: dict[str, Any]) -> set[str]:
    return {p.name for p in plan.pools for s in p.scale_sets if _selects(pod, dict(plan.boot.node(s.name).labels))}


def test_gb300_declares_both_releases_at_the_pinned_versions(gb300_run: ProgramRun, gb300_plan: ClusterPlan) -> None:
    releases = _releases(gb300_run)
    dra, dranet = releases[DRA_CHART], releases[DRANET_CHART]
    assert (dra["chart"], dra["version"], dra["repositoryOpts"]["repo"], dra["namespace"]) == (
        "nvidia-dra-driver-gpu", "25.12.0", "https://helm.ngc.nvidia.com/nvidia", DRA_DRIVER_NAMESPACE)
    assert DRA_DRIVER.version == "25.12.0" and DRANET.version == "1.4.0"
    assert (dranet["chart"], dranet["version"], dranet["namespace"]) == (
        "oci://registry.k8s.io/networking/charts/dranet", "1.4.0", "kube-system")
    for inputs in (dra, dranet):  # never atomic (objects/releases.py); their DaemonSets are not awaited
        assert inputs["atomic"] is False and inputs["skipAwait"] is True
    # ComputeDomains only: GPUs stay the device plugin's nvidia.com/gpu; the driver is on the host (rack image).
    values = dra["values"]
    assert values["resources"] == {"gpus": {"enabled": False}, "computeDomains": {"enabled": True}}
    assert values["nvidiaDriverRoot"] == "/"
    assert dranet["values"]["args"] == {"moveIBInterfaces": False, "cloudProviderHint": "AZURE"}
    # The images at the pinned tags, from the cluster's registry (the chart's repositories, served).
    assert dra["values"]["image"] == {"repository": gb300_plan.registry.serve(DRA_IMAGE), "tag": "v25.12.0"}
    assert dranet["values"]["image"] == {"repository": gb300_plan.registry.serve(DRANET_IMAGE), "tag": "v1.4.0"}
    assert {f"{DRA_IMAGE}", f"{DRANET_IMAGE}"} <= set(cluster_upstream_images(gb300_plan.spec))
    # DRANET's schema admits no other top-level key (values.schema.json additionalProperties: false).
    assert set(dranet["values"]) <= {"image", "args", "affinity", "tolerations"}


def test_their_images_pass_the_public_registry_rule_and_a_public_one_is_caught(gb300_run: ProgramRun) -> None:
    steps = preview_document(gb300_run)["steps"]
    assert [v for v in run_policies(steps) if v.source == "kubernetes-image-public-registry"] == []
    for chart, upstream in ((DRA_CHART, DRA_IMAGE), (DRANET_CHART, DRANET_IMAGE)):
        broken = copy.deepcopy(steps)
        state = next(s["newState"] for s in broken if s["newState"]["type"] == RELEASE
                     and s["newState"]["inputs"]["name"] == chart)
        state["inputs"]["values"]["image"]["repository"] = upstream  # the chart's default
        caught = [v for v in run_policies(broken) if v.source == "kubernetes-image-public-registry"]
        assert [v.path for v in caught] == [state["urn"]], chart


def test_the_node_daemons_select_the_rack_pool_and_no_other(gb300_run: ProgramRun, gb300_plan: ClusterPlan) -> None:
    releases = _releases(gb300_run)
    plugin = releases[DRA_CHART]["values"]["kubeletPlugin"]
    dranet = releases[DRANET_CHART]["values"]
    racks = {p.name for p in gb300_plan.pools if p.racks is not None}
    assert racks == {"gb300"} and {p.name for p in gb300_plan.pools} == {"system", "gb300"}
    assert _pools_selected(gb300_plan, plugin) == racks
    assert _pools_selected(gb300_plan, dranet) == racks
    # prod's GPU pools (H100 and the rest) are not selected either.
    prod = plan_cluster(stack_spec("prod"))
    assert _pools_selected(prod, plugin) == _pools_selected(prod, dranet) == set()
    # The chart's default term, which these values replace, selects any node NFD finds an NVIDIA GPU on.
    assert _matches(NFD_DEFAULT_TERM, {"feature.node.kubernetes.io/pci-10de.present": "true"})
    assert plugin["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"] != [NFD_DEFAULT_TERM]
    # Both run on rack nodes still tainted by the pool and the preflight check.
    for scale_set in next(p for p in gb300_plan.pools if p.racks is not None).scale_sets:
        taints = [vars(t) for t in gb300_plan.boot.node(scale_set.name).taints]
        assert taints and all(_tolerates(d["tolerations"], t) for d in (plugin, dranet) for t in taints)
    # DRANET's default toleration (Exists, NoSchedule) would not do for a NoExecute taint; ours does.
    assert _tolerates(dranet["tolerations"], {"key": "x", "value": "", "effect": "NoExecute"})
    # The ComputeDomain controller runs on the system pool, not on control-plane nodes (the chart's default).
    controller = releases[DRA_CHART]["values"]["controller"]
    assert _pools_selected(gb300_plan, controller) == {"system"}


def test_dranets_device_class_is_declared_mapped_and_covered(gb300_run: ProgramRun) -> None:
    [device_class] = [r.inputs for r in gb300_run.registrations if r.type == DEVICE_CLASS]
    assert device_class["metadata"]["name"] == DRANET_DEVICE_CLASS == "dranet.net"
    assert device_class["spec"]["selectors"] == [{"cel": {"expression": 'device.driver == "dra.net"'}}]
    gang = Gang(18, 4, device_class=DRANET_DEVICE_CLASS, tolerations=TOLERATE_GPU)
    placement = admit(gang, "frontier", rack_nodes(), kueue_configuration(30, racks=True))
    assert len(placement) == 18 and len(racks_of(placement)) == 1
    [group] = rack_objects()[("ClusterQueue", "frontier")]["spec"]["resourceGroups"]
    quota = {r["name"]: r["nominalQuota"] for r in group["flavors"][0]["resources"]}
    assert quota["dra.net/nic"] == quota["nvidia.com/gpu"] == 216
    with pytest.raises(InadmissibleError, match=r"DeviceClass dranet\.net is not mapped"):
        admit(gang, "frontier", rack_nodes(), kueue_configuration(30))


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_dev_and_prod_declare_neither(stack: str, prod_run: ProgramRun, dev_run: ProgramRun) -> None:
    run = prod_run if stack == "prod" else dev_run
    assert not {DRA_CHART, DRANET_CHART} & set(_releases(run))
    assert not [r for r in run.registrations if r.type == DEVICE_CLASS]
    spec = stack_spec(stack)
    assert not {DRA_IMAGE, DRANET_IMAGE} & set(cluster_upstream_images(spec))
    assert not set(RACK_ADDONS) & set(plan_cluster(spec).versions.components)


def test_the_version_table_and_its_docs_carry_both() -> None:
    assert set(RACK_ADDONS) <= set(plan_cluster(stack_spec("gb300")).versions.components)
    text = (Path(ROOT) / "docs" / "versions.md").read_text()
    for component in RACK_ADDONS:
        assert component.name in text and component.version in text and "1.36" in component.minors


def test_dranets_database_directory_is_mounted_writable(gb300_run: ProgramRun) -> None:
    # dranet v1.4.0 README.md: "/var/run/dranet" must be mounted writable (hostPath DirectoryOrCreate); the chart's
    # daemonset.yaml mounts none. The patch names the chart's DaemonSet and container (`dranet.fullname`).
    steps = [s["newState"] for s in preview_document(gb300_run)["steps"]]
    patches = [s for s in steps if s["type"] == "kubernetes:apps/v1:DaemonSetPatch"]
    assert len(patches) == 1
    state = patches[0]
    inputs = state["inputs"]
    assert (inputs["metadata"]["name"], inputs["metadata"]["namespace"]) == ("dranet", "kube-system")
    pod = inputs["spec"]["template"]["spec"]
    volume = next(v for v in pod["volumes"] if v["hostPath"]["path"] == "/var/run/dranet")
    assert volume["hostPath"]["type"] == "DirectoryOrCreate"
    (container,) = pod["containers"]
    assert container["name"] == "dranet"
    mount = next(m for m in container["volumeMounts"] if m["name"] == volume["name"])
    assert mount["mountPath"] == "/var/run/dranet" and not mount.get("readOnly")
    release = next(s["urn"] for s in steps if s["type"] == RELEASE and s["inputs"]["name"] == DRANET_CHART)
    assert release in state["dependencies"]
