"""InfiniBand in pods: the RDMA shared device plugin on InfiniBand pools, and the two consumers that must accept a pod
asking for its resource (Kueue's admission, the autoscaler's scale-from-zero templates).

Rules: Mellanox/k8s-rdma-shared-dev-plugin v1.5.3 README.md (config fields, `resourcePrefix` default `rdma`,
selectors ANDed) and pkg/resources/pci_net_device.go (linkType = the netdevice's encapsulation type); kueue v0.19.2
pkg/scheduler/flavorassigner/flavorassigner.go ("resource %s unavailable in ClusterQueue" for a requested resource no
resource group covers) and apis/config/v1beta2 Resources.excludeResourcePrefixes; kubernetes/autoscaler
cluster-autoscaler-1.36.1 cloudprovider/azure/azure_template.go (resource tags: `_` read as `/`)."""

from __future__ import annotations

import json
from typing import Any

import yaml

from gpucluster.catalog.in_cluster import RDMA_RESOURCE
from gpucluster.kubernetes.objects.images import pod_spec
from gpucluster.kubernetes.objects.kueue import kueue_configuration, kueue_objects
from gpucluster.kubernetes.objects.layer import layer_objects
from gpucluster.kubernetes.objects.rdma import APP
from gpucluster.planning.node_template import autoscaler_tags
from gpucluster.planning.registry import cluster_upstream_images
from gpucluster.simulation.check import plan_checked
from gpucluster.vocabulary import AUTOSCALER_RESOURCE_TAG_PREFIX
from tests.support.manifest_validation import validate_object
from tests.support.stacks import ROOT, stack_spec

GANG_POD = {"cpu": "96", "memory": "1800Gi", "nvidia.com/gpu": "8", RDMA_RESOURCE: "1"}


def uncovered(requests: dict[str, Any], queue: dict[str, Any], configuration: dict[str, Any]) -> list[str]:
    """Requested resources that make a workload inadmissible in the queue: not excluded by the configuration's
    prefixes and covered by no resource group (flavorassigner.go findFlavorForPodSets, RGByResource nil)."""
    excluded = (configuration.get("resources") or {}).get("excludeResourcePrefixes") or []
    covered = {r for group in queue["spec"]["resourceGroups"] for r in group["coveredResources"]}
    return [r for r in requests if not any(r.startswith(p) for p in excluded) and r not in covered]


def test_kueue_admits_a_gang_that_asks_for_the_hcas() -> None:
    plan = plan_checked(stack_spec("prod"))
    queue = next(o for o in kueue_objects(plan.scheduling) if o["kind"] == "ClusterQueue")
    configuration = kueue_configuration(10)
    assert uncovered(GANG_POD, queue, configuration) == []
    earlier = {k: v for k, v in configuration.items() if k != "resources"}
    assert uncovered(GANG_POD, queue, earlier) == [RDMA_RESOURCE]


def test_the_plugin_runs_on_infiniband_pools_only_and_selects_the_ib_hcas() -> None:
    plan = plan_checked(stack_spec("prod"))
    objects = [o for o in layer_objects(plan) if o["metadata"]["name"] == APP]
    for o in objects:
        validate_object(o)
    config = json.loads(next(o for o in objects if o["kind"] == "ConfigMap")["data"]["config.json"])
    [entry] = config["configList"]
    assert f"{entry['resourcePrefix']}/{entry['resourceName']}" == RDMA_RESOURCE
    # Accelerated networking is a Mellanox VF too, on Ethernet: the link type keeps it out (selectors are ANDed).
    assert entry["selectors"] == {"vendors": ["15b3"], "linkTypes": ["infiniband"]}
    daemonset = next(o for o in objects if o["kind"] == "DaemonSet")
    pod = pod_spec(daemonset)
    assert pod is not None
    terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms[0]["matchExpressions"][0]["values"] == sorted(p.name for p in plan.pools if p.infiniband) == ["h100"]
    assert plan.registry.serves(pod["containers"][0]["image"])
    assert plan.bring_up is not None and plan.bring_up.placements()[APP] == ("h100",)
    assert not [o for o in layer_objects(plan_checked(stack_spec("dev"))) if o["metadata"]["name"] == APP]


def test_a_scale_set_at_zero_offers_the_resource_to_the_autoscaler() -> None:
    plan = plan_checked(stack_spec("prod"))
    for pool in plan.pools:
        tags = autoscaler_tags("prod", pool, pool.scale_sets[0], 0, plan.spec.location)
        resources = {k.removeprefix(AUTOSCALER_RESOURCE_TAG_PREFIX).replace("_", "/"): v for k, v in tags.items()
                     if k.startswith(AUTOSCALER_RESOURCE_TAG_PREFIX)}
        assert (RDMA_RESOURCE in resources) is pool.infiniband


def test_nvlink_rack_pools_get_their_nics_from_dranet_not_the_shared_plugin() -> None:
    """GB300's InfiniBand VFs are RDMA-only: pods get them from DRANET (docs/rack-scale.md, kubernetes-sigs/dranet
    v1.4.0 `--move-ib-interfaces=false`), so the shared plugin neither runs on a rack pool nor is offered to the
    autoscaler for one, and its image is not served for a stack with only rack pools."""
    plan = plan_checked(stack_spec("gb300"))
    assert [p.name for p in plan.pools if p.racks is not None and p.infiniband]
    assert not [o for o in layer_objects(plan) if o["metadata"]["name"] == APP]
    for pool in plan.pools:
        tags = autoscaler_tags("gb300", pool, pool.scale_sets[0], 0, plan.spec.location)
        assert not [k for k in tags if k.endswith(RDMA_RESOURCE.replace("/", "_"))]
    assert not [i for i in cluster_upstream_images(plan.spec) if "rdma-shared-dev-plugin" in i]
    assert [i for i in cluster_upstream_images(stack_spec("prod")) if "rdma-shared-dev-plugin" in i]


def test_the_documented_job_asks_for_what_nccl_needs() -> None:
    """docs/scheduling.md's job: the HCAs, IPC_LOCK to pin memory for them, a memory-backed /dev/shm."""
    text = (ROOT / "docs" / "scheduling.md").read_text()
    block = text.split("## Submitting a gang job", 1)[1].split("```yaml", 1)[1].split("```", 1)[0]
    job = yaml.safe_load(block.replace("<your training image>", "example/trainer:1"))
    pod = job["spec"]["template"]["spec"]
    [container] = pod["containers"]
    assert container["resources"]["limits"][RDMA_RESOURCE] == 1
    assert "IPC_LOCK" in container["securityContext"]["capabilities"]["add"]
    shm = next(m for m in container["volumeMounts"] if m["mountPath"] == "/dev/shm")
    assert next(v for v in pod["volumes"] if v["name"] == shm["name"])["emptyDir"]["medium"] == "Memory"
