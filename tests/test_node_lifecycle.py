"""Node objects of VMs that are gone are deleted: cloud-provider-azure's cloud-controller-manager runs its
cloud-node-lifecycle controller with a read-only identity.

Rules read at kubernetes-sigs/cloud-provider-azure v1.36.5: vendor/k8s.io/cloud-provider/names/controller_names.go
(the alias `cloud-node-lifecycle`), controllers/nodelifecycle MonitorNodes (deletes NotReady Nodes whose instance does
not exist; taints shut-down ones), pkg/provider/azure.go (`disableAvailabilitySetNodes` only with vmType vmss),
cmd/cloud-controller-manager/app/options/options.go (leader election Lease `cloud-controller-manager` in
kube-system), pkg/provider/azure_vmss_cache.go and azure_vmss.go (the scale-set and scale-set VM lists)."""

from __future__ import annotations

import json
from typing import Any

from gpucluster.catalog.addon_permissions import NODE_LIFECYCLE, addons_for
from gpucluster.kubernetes.objects.images import pod_spec
from gpucluster.kubernetes.objects.layer import layer_objects
from gpucluster.kubernetes.objects.node_lifecycle import APP, CONFIG_PATH
from gpucluster.offline.engine import ProgramRun
from gpucluster.simulation.check import plan_checked
from tests.support.manifest_validation import validate_object
from tests.support.stacks import stack_spec


def _objects() -> list[dict[str, Any]]:
    return [o for o in layer_objects(plan_checked(stack_spec("prod"))) if APP in o["metadata"]["name"]]


def test_the_manager_runs_the_lifecycle_controller_only() -> None:
    objects = _objects()
    for o in objects:
        validate_object(o)
    deployment = next(o for o in objects if o["kind"] == "Deployment")
    pod = pod_spec(deployment)
    assert pod is not None
    [container] = pod["containers"]
    assert "--controllers=cloud-node-lifecycle" in container["args"] and "--cloud-provider=azure" in container["args"]
    assert f"--cloud-config={CONFIG_PATH}" in container["args"]
    mount = next(m for m in container["volumeMounts"] if m["name"] == "cloud-config")
    assert CONFIG_PATH.startswith(mount["mountPath"] + "/")
    assert container["image"].endswith("/mcr/oss/kubernetes/azure-cloud-controller-manager:v1.36.5")
    config_map = next(o for o in objects if o["kind"] == "ConfigMap")
    config = json.loads(config_map["data"]["azure.json"])
    assert config["vmType"] == "vmss" and config["disableAvailabilitySetNodes"] is True
    assert config["useManagedIdentityExtension"] is True and config["userAssignedIdentityID"]
    assert config["nodeInstanceNotFoundGracePeriodInSeconds"] > 0  # a just-joined node's VM may not show in ARM


def test_its_kubernetes_rights_are_what_the_controller_does() -> None:
    objects = _objects()
    rules = next(o for o in objects if o["kind"] == "ClusterRole")["rules"]
    nodes = next(r for r in rules if r["resources"] == ["nodes"])
    assert {"list", "watch", "delete", "patch", "update"} <= set(nodes["verbs"])
    assert not [r for r in rules if set(r["resources"]) & {"secrets", "pods", "services"}]
    lease = next(o for o in objects if o["kind"] == "Role")["rules"]
    assert any(r.get("resourceNames") == ["cloud-controller-manager"] for r in lease)


def test_its_azure_identity_only_reads_scale_sets(prod_run: ProgramRun) -> None:
    assert all(p.action.endswith("/read") for p in NODE_LIFECYCLE)
    assert "node-lifecycle" in addons_for(True) and "node-lifecycle" in addons_for(False)
    [role] = [r for r in prod_run.registrations if r.type == "azure-native:authorization:RoleDefinition"
              and "-node-lifecycle-" in r.name]
    assert set(role.inputs["permissions"][0]["actions"]) == {p.action for p in NODE_LIFECYCLE}


def test_it_starts_on_the_system_pool_in_the_first_boot() -> None:
    plan = plan_checked(stack_spec("prod"))
    assert plan.bring_up is not None and plan.bring_up.placements()[APP] == ("system",)
