"""`gpucluster diff`: what a change creates, updates, replaces and deletes, and what it must not do.

Replacement rules come from the providers (components/diff/replacement.py cites each): azure-native replaces on
PUT-path parameters and ForceNew properties (pulumi-azure-native provider/pkg/provider/diff.go,
provider/pkg/gen/replacement.go), Kubernetes on metadata.name/namespace and per-kind fields
(pulumi-kubernetes provider/pkg/provider/diff.go).
"""

from __future__ import annotations

import copy
import itertools
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpucluster.diff.command import refusals
from gpucluster.diff.compare import PlanDiff, changed_paths, diff_sides
from gpucluster.diff.render import capacity_lines as render_capacity
from gpucluster.diff.replacement import refused, replacements, replacing
from gpucluster.diff.sides import Side, side_from_document
from tests.support.cli import gpucluster
from tests.support.diff_scenarios import diff, planned, scenario, side, ssh_key
from tests.support.plan_sides import plan_document, stack_raw
from tests.support.scale_sets import as_typed_class, is_scale_set
from tests.support.stacks import plan_stack, spec_of


def _kinds(result: PlanDiff, severity: str) -> set[str]:
    return {f.source for f in result.flags if f.severity == severity}


def test_a_version_bump_under_the_same_image_versions_is_refused() -> None:
    """The node images bake the kubelet and kubeadm of the stack's version: a new patch changes every image
    template's bake while the versions stay; Image Builder refuses to change a template ("Update/Upgrade of image
    templates is currently not supported") and the versions already exist. The diff says so before `pulumi up`."""
    result = diff("previous-patch", "dev")  # a patch upgrade
    refused_templates = {f.path for f in result.errors if f.source == "refused-by-azure"}
    assert refused_templates == {f"dev-images-{d}-template" for d in ("gpu", "cpu", "confidential", "apiserver", "etcd")}
    assert all("cluster.images.<definition>.version" in (f.fix or "") for f in result.errors)
    # Of the boot documents only the API servers' changes (kubeadm's kubernetesVersion); nodes' carry no version.
    assert {b.resource for b in result.boot} == {"dev-cp-apiserver"}


def test_a_version_bump_with_new_image_versions_reaches_new_instances_only() -> None:
    """With new image versions the templates are new (their names carry the version) and every scale set boots the
    new version: Azure applies a scale-set model change to new and reimaged instances only, the upgrade policy being
    Manual (azure-compute-docs virtual-machine-scale-sets-upgrade-policy.md); etcd members keep theirs."""
    result = diff("previous-patch", "new-images")
    assert not result.errors, result.errors
    scale_sets = {name for name, s in ((u.rsplit("::", 1)[-1], s) for u, s in side("dev").resources.items())
                  if is_scale_set(s)}
    by_resource = {i.resource: i for i in result.images}
    assert {r for r, i in by_resource.items() if i.type.endswith("VirtualMachineScaleSet")} == scale_sets
    for name in scale_sets:
        change = by_resource[name]
        assert change.before.endswith(" 1.0.0") and change.after.endswith(" 1.1.0")
        assert change.applies.startswith("new and reimaged instances only: the scale set's upgradePolicy is Manual")
    assert {r for r, i in by_resource.items() if i.applies.startswith("not applied")} == {"etcd-0", "etcd-1", "etcd-2"}
    replaced = {c.name for c in result.changes if c.action == "replace"}
    assert {f"dev-images-{d}-template" for d in ("gpu", "cpu", "confidential", "apiserver", "etcd")} <= replaced
    # Scale sets update in place (the image id may change); none is replaced.
    assert not [c for c in result.changes if c.action == "replace" and c.type.endswith("VirtualMachineScaleSet")]


def test_the_diff_prints_the_image_bump_and_how_azure_applies_it(tmp_path: Path) -> None:
    from rich.console import Console

    from gpucluster.diff.render import print_diff

    console = Console(record=True, width=400)
    print_diff(console, diff("previous-patch", "new-images"))
    text = console.export_text()
    assert "node image t4-z1-00: gpu 1.0.0 -> gpu 1.1.0; Azure applies it to new and reimaged instances only" in text
    assert "node image etcd-0: etcd 1.0.0 -> etcd 1.1.0; not applied" in text


def test_shrinking_an_infiniband_pool_and_removing_a_team_need_acknowledgement() -> None:
    result = diff("ib-600", "ib-300-one-team")
    errors = {(f.source, f.path) for f in result.errors}
    deleted_sets = [c.name for c in result.changes if c.action == "delete"
                    and c.type == "azure-native:compute:VirtualMachineScaleSet"]
    assert sorted(deleted_sets) == ["h100-z1-01", "h100-z2-01", "h100-z3-01"]
    # The base's `up` protected every domain: the engine refuses the delete, and the diff says so too
    assert errors == {(kind, s) for s in deleted_sets for kind in ("deleted-infiniband-domain", "protected")} | {
        ("deleted-team-namespace", "evals")}
    delta = result.capacity["delta"]
    assert (delta["nodes"], delta["gpus"], delta["infinibandDomains"]) == (-300, -2400, -3)
    assert result.capacity["head"]["teamQuota"].keys() == {"research"}

    # Acknowledged in the same change: still protected in the base's state, so two steps are needed
    acknowledged = diff("ib-600", "ib-300-one-team", {"teams": ["evals"], "infinibandDomains": ["h100-*"]})
    assert {f.source for f in acknowledged.errors} == {"protected"}
    assert all("while the stack still declares it" in (f.fix or "") for f in acknowledged.errors)
    assert _kinds(acknowledged, "warning") == {"deleted-infiniband-domain", "deleted-team-namespace"}
    # Step one, the acknowledgement alone, lifts the protection; step two removes the domains
    first = scenario("ib-600")
    first["acknowledgeDeletions"] = {"infinibandDomains": ["h100-*"]}
    document, data = plan_document(first)
    lifted = diff_sides(side_from_document("ib-600-acknowledged", document, data), side("ib-300-one-team", {
        "teams": ["evals"], "infinibandDomains": ["h100-*"]}))
    assert not lifted.errors


def test_adding_a_pool_creates_it_and_flags_the_api_server_resize() -> None:
    result = diff("dev", "pool-added")
    created = {c.name for c in result.changes if c.action == "create"}
    assert {"cpu-z1-00", "cpu-z2-00", "cpu-z3-00"} <= created
    assert not result.errors  # appending a pool moves no block
    [resize] = [f for f in result.flags if f.source == "control-plane-resize"]
    assert resize.path == "dev-cp-apiserver" and "Standard_D4s_v5 ->" in resize.message
    assert result.capacity["delta"]["nodes"] == 1300


def test_growing_an_unpinned_pool_past_its_block_is_a_moved_block_error() -> None:
    result = diff("dev", "system-grown")
    moved = [f for f in result.errors if f.source == "moved-block"]
    assert {f.path for f in moved} >= {"pool-system"}
    assert all("pinnedBlocks" in (f.fix or "") for f in moved)
    problems = refusals(result)
    assert problems is not None and any(p.path == "moved-block pool-system" for p in problems.problems)


def test_reordering_zones_changes_nothing() -> None:
    """Placement is keyed by zone name: before, scale set j went to zones[j mod Z] in list order, so
    reordering zones moved etcd members (refused by Azure) and renamed scale sets."""
    result = diff("dev", "zones-reordered")
    assert result.changes == [] and result.flags == []


def test_changes_azure_refuses_on_existing_vms_are_errors_with_the_procedure() -> None:
    result = diff("dev", "ssh-and-etcd-size")
    refusals_found = [f for f in result.errors if f.source == "refused-by-azure"]
    assert {f.path for f in refusals_found} == {"etcd-0", "etcd-1", "etcd-2"}
    assert all(f.message.startswith("osProfile.linuxConfiguration") and "docs/operations.md" in (f.fix or "")
               for f in refusals_found)
    resized = [f for f in result.flags if f.source == "control-plane-resize"]
    assert {f.path for f in resized} == {"etcd-0", "etcd-1", "etcd-2"}


def test_etcd_members_change_one_at_a_time() -> None:
    """Each etcd VM depends on the one before it, so Pulumi never updates two members at once (the engine
    starts a resource's step only after the steps of its dependencies finish)."""
    vms = sorted((s for s in side("dev").resources.values() if s["type"] == "azure-native:compute:VirtualMachine"
                  and "DeployRunner" not in s["urn"]), key=lambda s: s["urn"])  # the runner holds no quorum
    assert [v["urn"].rsplit("::", 1)[-1] for v in vms] == ["etcd-0", "etcd-1", "etcd-2"]
    for before, after in itertools.pairwise(vms):
        assert before["urn"] in after["dependencies"]


@pytest.mark.parametrize(("resource_type", "path", "replaces"), [
    ("azure-native:network:Subnet", "subnetName", True),
    ("azure-native:network:Subnet", "addressPrefix", False),  # an update, which Azure refuses while in use
    ("azure-native:compute:VirtualMachineScaleSet", "sku.name", False),
    ("azure-native:compute:VirtualMachineScaleSet", "vmScaleSetName", True),
    ("azure-native:compute:VirtualMachine", "location", True),
    ("azure-native:resources:ResourceGroup", "location", True),
    ("azure-native:authorization:RoleAssignment", "principalId", True),
    ("kubernetes:core/v1:Namespace", "metadata.name", True),
    ("kubernetes:core/v1:ConfigMap", "data.Corefile", True),
    ("kubernetes:apps/v1:Deployment", "spec.template.spec.containers[0].image", False),
    ("kubernetes:apps/v1:Deployment", "spec.selector.matchLabels.app", True),
    ("kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding", "roleRef.name", True),
    ("kubernetes:helm.sh/v3:Release", "values.replicas", False),
    ("tls:index/locallySignedCert:LocallySignedCert", "validityPeriodHours", True),
    ("tls:index/locallySignedCert:LocallySignedCert", "earlyRenewalHours", False),
])
def test_replacement_follows_the_providers(resource_type: str, path: str, replaces: bool) -> None:
    assert (replacing(resource_type, path) is not None) is replaces


def test_refused_changes() -> None:
    assert refused("azure-native:compute:VirtualMachine", "zones[0]") is not None
    assert refused("azure-native:compute:VirtualMachine", "osProfile.linuxConfiguration.ssh") is not None
    assert refused("azure-native:compute:VirtualMachine", "hardwareProfile.vmSize") is None
    assert refused("azure-native:compute:VirtualMachine", "storageProfile.imageReference.version") is not None
    scale_set = "azure-native:compute:VirtualMachineScaleSet"
    assert refused(scale_set, "virtualMachineProfile.storageProfile.imageReference.sku") is not None
    assert refused(scale_set, "virtualMachineProfile.storageProfile.imageReference.version") is None


def test_boot_folders_are_compared_when_both_plans_have_them() -> None:
    base = Side("base", {}, {}, None, {"etcd-0.yaml": "a\nversion: 1\n", "old.yaml": "x"})
    head = Side("head", {}, {}, None, {"etcd-0.yaml": "a\nversion: 2\n", "new.yaml": "y"})
    files = diff_sides(base, head).boot_files
    assert files is not None and files["added"] == ["new.yaml"] and files["removed"] == ["old.yaml"]
    assert "-version: 1" in files["changed"]["etcd-0.yaml"] and "+version: 2" in files["changed"]["etcd-0.yaml"]
    absent = diff_sides(Side("base", {}, {}), head)
    assert absent.boot_files is None and any("no boot/ folder in base" in n for n in absent.notes)


def test_a_renamed_pool_is_an_error() -> None:
    base = side("dev")
    document = json.loads(planned("dev")[0])
    renamed = json.loads(json.dumps(document).replace("t4-z", "gpu-z").replace('"gpucluster-pool": "t4"',
                                                                                '"gpucluster-pool": "gpu"'))
    result = diff_sides(base, side_from_document("renamed", renamed))
    assert "renamed-scale-set" in _kinds(result, "error")


def test_cli_diff_and_plan_base(dev_out: Path, tmp_path: Path) -> None:
    """End to end: `plan --base` adds the diff to the summary, the terminal and report.html; `diff --json`. The
    change: another Kubernetes patch, baked into new versions of every node image."""
    stack = tmp_path / "Pulumi.dev.yaml"
    text = (Path(__file__).parent.parent / "stacks" / "Pulumi.dev.yaml").read_text()
    current = re.search(r'kubernetesVersion: "(\d+\.\d+)\.(\d+)"', text)
    assert current is not None  # the next patch of the shipped minor, confirmed in the stack (docs/versions.md)
    newer = f"{current.group(1)}.{int(current.group(2)) + 1}"
    images = "".join(f"\n      {d}: {{version: 1.1.0}}" for d in ("gpu", "cpu", "confidential", "apiserver", "etcd"))
    stack.write_text(text.replace(current.group(0), f'kubernetesVersion: "{newer}"\n    kubernetesPatchVerified: '
                                                    f'{{version: "{newer}", source: "kubernetes.io/releases"}}'
                                                    f"\n    images:{images}"))
    head = tmp_path / "head"
    result = plan_stack(stack, head, "--base", str(dev_out))
    assert result.returncode == 0, result.stderr
    summary = json.loads((head / "summary.json").read_text())
    assert summary["diff"]["summary"]["bootDocuments"] == 1  # the API servers' kubeadm configuration
    assert summary["diff"]["summary"]["nodeImages"] == 9  # 6 scale sets and 3 etcd members
    # the boot documents compared line by line, as with `diff` of two folders (it said: no boot/ folder in this plan)
    assert not [n for n in summary["diff"]["notes"] if "no boot/ folder" in n]
    changed = summary["diff"]["bootFiles"]["changed"]
    assert [line[1:].strip() for line in changed["apiserver.yaml"] if line.startswith(("-", "+"))
            and "kubernetesVersion:" in line] == [f"kubernetesVersion: v{current.group(1)}.{current.group(2)}",
                                                   f"kubernetesVersion: v{newer}"]
    assert "Change against" in (head / "report.html").read_text()
    out = gpucluster("diff", str(dev_out), str(head), "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["summary"]["update"] == 6  # the scale sets' image; etcd members ignore theirs
    text_out = gpucluster("diff", str(dev_out), str(head / "preview.json"))
    assert "boot documents changed (1" in text_out.stdout
    assert "node image t4-z1-00: gpu 1.0.0 -> gpu 1.1.0; Azure applies it to new and reimaged instances only" \
        in text_out.stdout


def test_plan_base_refuses_what_azure_would_refuse(dev_out: Path, tmp_path: Path) -> None:
    raw = copy.deepcopy(stack_raw("dev"))
    raw["access"] = {"sshPublicKeys": [ssh_key()]}


    stack = tmp_path / "Pulumi.dev.yaml"
    stack.write_text(yaml.safe_dump({"config": {"azure-native:location": "eastus2", "gpucluster:cluster": raw}}))
    out = tmp_path / "head"
    result = plan_stack(stack, out, "--base", str(dev_out))
    assert result.returncode == 2
    assert not out.exists()  # nothing written
    lines = result.stderr.strip().splitlines()
    assert any(line.startswith("error: refused-by-azure etcd-0: osProfile.linuxConfiguration") for line in lines)
    assert all("Traceback" not in line for line in lines)


def test_adding_a_pool_to_prod_shows_the_api_server_resize_and_the_quota_resplit(prod_run) -> None:
    """The scenario from review: adding a GPU pool to prod silently resized the API servers and re-split every
    team's quota; the diff names both, and moves no block (prod's blocks are pinned)."""
    from collections import Counter

    from gpucluster.offline.preview import preview_document
    from gpucluster.planning.cluster_plan import plan_cluster
    from gpucluster.report.report_data import report_data

    raw = stack_raw("prod")
    spec = spec_of(raw)
    base = side_from_document("prod", preview_document(prod_run), report_data(
        plan_cluster(spec), "prod", Counter(r.type for r in prod_run.registrations if r.custom), [], {}))
    # 520 more nodes: past 8,000 the API servers need a 17th vCPU (one per 500 nodes), so a bigger size
    raw["pools"].insert(2, {"name": "a100", "kind": "gpu", "vmSize": "Standard_ND96asr_v4", "count": 520,
                            "podsPerNode": 32, "podAddresses": "prefixes"})
    document, data = plan_document(raw, "prod")
    result = diff_sides(base, side_from_document("prod+a100", document, data))
    assert not result.errors
    [resize] = [f for f in result.flags if f.source == "control-plane-resize" and f.path.endswith("apiserver")]
    assert resize.severity == "warning"
    lines = "\n".join(render_capacity(result.capacity))
    assert f"nodes: {base_nodes(base):,} -> {base_nodes(base) + 520:,} (+520)" in lines
    assert all(f"team {t['name']} quota per flavor" in lines for t in raw["teams"])
    assert {c.name for c in result.changes if c.action == "create"} >= {"a100-z1-00", "a100-z2-00"}


def base_nodes(base: Side) -> int:
    from gpucluster.diff.capacity import capacity

    return int(capacity(base)["nodes"])


def test_plan_base_must_be_a_plan_folder(tmp_path: Path) -> None:
    result = gpucluster("plan", "dev", "--out", str(tmp_path / "out"), "--base", str(tmp_path / "nope"))
    assert result.returncode == 2 and not (tmp_path / "out").exists()
    assert result.stderr.startswith("error: --base: ") and "holds no preview.json" in result.stderr


def test_a_preview_without_digests_shows_no_masked_change() -> None:
    """A real `pulumi preview --json`, or a plan from before digests existed, carries no `secretDigests`: its
    masked inputs cannot be compared, and must not read as changed (which would replace every certificate)."""
    document, data = (json.loads(text) for text in planned("dev"))
    bare = {k: v for k, v in document.items() if k != "secretDigests"}
    result = diff_sides(side_from_document("base", bare, data), side_from_document("head", document, data))
    assert not result.changes and not result.boot and not result.flags


def test_moving_scale_sets_off_the_typed_class_is_an_update_in_place() -> None:
    """NodeScaleSet aliases the typed type (components/azure/scale_set/resource.py): a plan made when the scale sets were
    azure-native's typed class diffs as updates of the same resources, not as deletions and re-creations."""
    document, data = (json.loads(text) for text in planned("dev"))
    digests = document["secretDigests"]
    for step in document["steps"]:
        if is_scale_set(step["newState"]) and step["newState"]["type"] != "azure-native:compute:VirtualMachineScaleSet":
            new_urn = step["urn"]
            step["urn"] = as_typed_class(step["newState"])["urn"]
            digests[step["urn"]] = digests.pop(new_urn)
    result = diff_sides(side_from_document("typed", document, data), side("dev"))
    moved = [c for c in result.changes if c.urn.split("::")[-2].endswith("pulumi-python:dynamic:Resource")]
    assert len(moved) == 5 and {c.action for c in result.changes} == {"update"} and not result.flags
    assert all(set(c.paths) == {"armType", "apiVersion", "subscriptionId"} for c in moved)
    assert any("5 scale sets move" in note for note in result.notes)


ROUTE = "pulumi-python:dynamic:Resource"
_SET = {"armType": "Microsoft.Compute/virtualMachineScaleSets", "apiVersion": "2026-07-02", "zones": ["1"],
        "sku": {"name": "Standard_ND96isr_H100_v5", "capacity": 100}, "platformFaultDomainCount": 1,
        "tags": {"a": "1"}, "virtualMachineProfile": {"osProfile": {"adminUsername": "azureuser"}}}


@pytest.mark.parametrize(("path", "value", "replaces"), [
    ("zones", ["2"], True),
    ("sku", {"name": "Standard_ND96isr_H200_v5", "capacity": 100}, True),
    ("sku", {"name": "Standard_ND96isr_H100_v5", "capacity": 7}, None),  # capacity is the autoscaler's
    ("platformFaultDomainCount", 5, True),  # not in VirtualMachineScaleSetUpdate
    ("virtualMachineProfile", {"osProfile": {"adminUsername": "ops"}}, True),
    ("tags", {"a": "2"}, False),
])
def test_the_route_replaces_what_azure_cannot_change_in_place(path: str, value: Any, replaces: bool | None) -> None:
    new = {**_SET, path: value}
    changed = changed_paths(_SET, new, [])
    found = replacements(ROUTE, changed, _SET, new)
    assert bool(found) is bool(replaces)
    if replaces is None:  # the offline diff sees the capacity; the provider ignores it (test_scale_set_provider.py)
        assert changed == ["sku.capacity"] and not found


def test_a_pool_that_grows_past_etcds_quota_step_warns_how_to_roll_it() -> None:
    """1,500 to 2,400 GPU VMs move etcd's --quota-backend-bytes from 2 to 4 GiB in the members' boot documents,
    which running members never read again: the diff says so and how to roll it, member by member."""
    from gpucluster.diff.compare import running_sizing_flags
    from gpucluster.planning.cluster_plan import plan_cluster
    from tests.support.stacks import small_cluster

    def summary(count: int) -> dict[str, Any]:
        raw = small_cluster(network={"addressSpace": ["10.0.0.0/12"]})
        raw["pools"][1]["count"] = count
        etcd = plan_cluster(spec_of(raw)).control_plane.etcd
        return {"controlPlane": {"etcd": {"quotaBackendGib": etcd.quota_backend_bytes / 2**30}, "eventsEtcd": None}}

    base, head = summary(1500), summary(2400)
    [flag] = running_sizing_flags(base, head)
    assert (flag.severity, flag.source, flag.path) == ("warning", "etcd-quota-not-applied", "etcd members")
    assert flag.message.startswith("--quota-backend-bytes moves from 2 to 4 GiB in the etcd members' boot documents")
    assert flag.fix is not None and "--quota-backend-bytes=4294967296 in /usr/local/sbin/gpucluster-etcd-run" in flag.fix
    assert running_sizing_flags(base, base) == [] and running_sizing_flags(None, head) == []
