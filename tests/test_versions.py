"""The version table: shipped stacks on a supported minor, every coupled component in range, end of life
judged by the policy pack and warned about by the summary, and a minor upgrade that replaces nothing stateful.

Facts under test come from components/catalog/versions.py, each row naming its source (kubernetes.io/releases,
kubernetes/autoscaler README 'Releases', kubeadm constants, the add-ons' release notes)."""

from __future__ import annotations

from dataclasses import replace
from datetime import date, timedelta
from typing import Any

import pytest
import yaml

from gpucluster.bake.bundle import pins
from gpucluster.catalog.versions import CILIUM, KUBERNETES_RELEASES, MINOR_COUPLED, minor_of
from gpucluster.errors import SpecError
from gpucluster.offline.engine import ProgramRun, Registration, run_program
from gpucluster.offline.policy_runner import run_policies
from gpucluster.offline.preview import preview_document
from gpucluster.planning.cluster_plan import plan_cluster
from gpucluster.planning.versions import plan_versions
from gpucluster.policies.rules.versions import kubernetes_end_of_life
from gpucluster.report.versions_report import version_warnings, versions_data
from tests.support.cli import gpucluster
from tests.support.stacks import ROOT, STACKS, small_cluster, small_spec, spec_of, stack_spec

TODAY = date(2026, 11, 22)


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_shipped_stacks_run_a_supported_minor_with_every_component_in_range(stack: str) -> None:
    spec = stack_spec(stack)
    versions = plan_versions(spec)
    assert versions.release.end_of_life > TODAY + timedelta(days=60)
    assert all(versions.minor in c.minors for c in versions.components)
    assert {"cluster-autoscaler", "cloud-controller-manager", "coredns", "etcd", "kubeadm-api", "kubelet-config-api",
            "kueue", "cilium", "gpu-operator"} == {c.key for c in versions.components}
    assert all(c.source for c in versions.components)


def test_coupled_versions_follow_the_minor() -> None:
    """cluster-autoscaler and cloud-provider-azure version with Kubernetes minors (autoscaler README
    'Releases'; cloud-provider-azure tags v1.<minor>.x): each minor's row carries its own minor."""
    for minor, coupled in MINOR_COUPLED.items():
        assert minor in KUBERNETES_RELEASES
        assert minor_of(coupled.cluster_autoscaler.version) == minor
        assert minor_of(coupled.cloud_controller_manager.version) == minor
        # the etcd image bakes the table's etcd for the stack's minor
        assert pins("etcd", "1.0.0", f"{minor}.1")["ETCD_VERSION"] == coupled.etcd.version


def test_the_layer_uses_the_table() -> None:
    plan = plan_cluster(stack_spec("dev"))
    from gpucluster.kubernetes.objects.autoscaler import autoscaler_objects
    from gpucluster.kubernetes.objects.dns import coredns_objects
    azure = {"subscription_id": "s", "tenant_id": "t", "resource_group": "g", "client_id": "c"}
    deployment = next(o for o in autoscaler_objects("dev", 6, 0.01, azure, "1.36") if o["kind"] == "Deployment")
    assert deployment["spec"]["template"]["spec"]["containers"][0]["image"].endswith(":v1.36.1")
    dns = next(o for o in coredns_objects(6, 2, "10.96.0.10", plan.versions.minor) if o["kind"] == "Deployment")
    assert dns["spec"]["template"]["spec"]["containers"][0]["image"].endswith(":v1.14.2")


def test_a_component_outside_its_range_is_a_plan_error() -> None:
    narrow = replace(CILIUM, minors=("1.34", "1.35"))
    with pytest.raises(SpecError) as error:
        plan_versions(small_spec(kubernetesVersion="1.36.4"), addons=(narrow,))
    assert str(error.value).startswith("cluster.kubernetesVersion: Cilium 1.20.3 does not support Kubernetes 1.36")
    # Add-ons do not bind a stack whose in-cluster layer is off.
    plan_versions(small_spec(kubernetesVersion="1.36.4", inCluster={"enabled": False}), addons=(narrow,))


def test_an_unknown_minor_is_exit_2(tmp_path) -> None:
    stack = yaml.safe_load((STACKS / "Pulumi.dev.yaml").read_text())
    stack["config"]["gpucluster:cluster"]["kubernetesVersion"] = "1.37.1"
    path = tmp_path / "Pulumi.dev.yaml"
    path.write_text(yaml.safe_dump(stack))
    result = gpucluster("plan", str(path), "--out", str(tmp_path / "out"))
    assert result.returncode == 2, result.stdout + result.stderr
    assert "cluster.kubernetesVersion: Kubernetes 1.37 has no coupled versions" in result.stderr + result.stdout
    assert "Traceback" not in result.stderr and not (tmp_path / "out").exists()


def test_summary_warns_within_sixty_days_of_end_of_life() -> None:
    data = versions_data(plan_cluster(stack_spec("dev")))
    eol = date.fromisoformat(data["kubernetes"]["endOfLife"])
    assert version_warnings(data, eol - timedelta(days=61)) == []
    assert "in 60 days" in version_warnings(data, eol - timedelta(days=60))[0]
    assert "reached end of life" in version_warnings(data, eol + timedelta(days=1))[0]


def _run(spec_overrides: dict[str, Any]) -> ProgramRun:
    stack = yaml.safe_load((STACKS / "Pulumi.dev.yaml").read_text())["config"]
    stack["gpucluster:cluster"].update(spec_overrides)
    return run_program(ROOT / "__main__.py", "gpucluster", "dev", stack)


@pytest.fixture(scope="module")
def eol_run() -> ProgramRun:
    return _run({"kubernetesVersion": "1.34.6"})


def test_end_of_life_minor_fails_the_policy_pack_by_default(eol_run: ProgramRun) -> None:
    """1.34 reached end of life on 2026-10-27 (kubernetes.io/releases/1.34)."""
    steps = preview_document(eol_run)["steps"]
    config = {"kubernetes-version-end-of-life": {"asOf": TODAY.isoformat()}}
    found = [v for v in run_policies(steps, config) if v.source == kubernetes_end_of_life.name]
    assert len(found) == 1 and found[0].mandatory
    assert "Kubernetes 1.34.6 reached end of life on 2026-10-27" in found[0].message
    lowered = {"kubernetes-version-end-of-life": {"asOf": TODAY.isoformat(), "enforcementLevel": "advisory"}}
    found = [v for v in run_policies(steps, lowered) if v.source == kubernetes_end_of_life.name]
    assert len(found) == 1 and not found[0].mandatory
    # A week before end of life the rule passes (the summary warns instead); minDaysLeft makes it stricter.
    early = {"kubernetes-version-end-of-life": {"asOf": "2026-10-20"}}
    assert not [v for v in run_policies(steps, early) if v.source == kubernetes_end_of_life.name]
    strict = {"kubernetes-version-end-of-life": {"asOf": "2026-10-20", "minDaysLeft": 60}}
    assert [v for v in run_policies(steps, strict) if v.source == kubernetes_end_of_life.name]


@pytest.fixture(scope="module")
def two_minors() -> tuple[ProgramRun, ProgramRun]:
    return _run({"kubernetesVersion": "1.35.9"}), _run({"kubernetesVersion": "1.36.4"})


def _by_urn(run: ProgramRun) -> dict[str, Registration]:
    return {r.urn: r for r in run.registrations if r.custom}


def _without_ignored(reg: Registration) -> dict[str, Any]:
    inputs = dict(reg.inputs)
    for path in reg.ignore_changes:
        head, _, rest = path.partition(".")
        if not rest:
            inputs.pop(head, None)
        elif isinstance(inputs.get(head), dict):
            inputs[head] = {k: v for k, v in inputs[head].items() if k != rest.split(".")[0]}
    return inputs


def test_a_minor_upgrade_changes_only_what_runs_the_minor(two_minors: tuple[ProgramRun, ProgramRun]) -> None:
    """1.35 -> 1.36 on the dev stack: the same resources, none added or removed. What changes in the
    preview: the API-server scale set (its version tags), the add-ons coupled to the minor (cluster-autoscaler,
    CoreDNS), and the node images' Image Builder templates: each bakes the stack's kubelet and kubeadm, so the new
    minor is a new bake, which `gpucluster diff` refuses under the same image version (tests/test_node_images.py).
    Nothing protected (etcd members and their disks) changes at all."""
    old, new = (_by_urn(r) for r in two_minors)
    assert old.keys() == new.keys()
    changed = {urn for urn in old if _without_ignored(old[urn]) != _without_ignored(new[urn])}
    names = {urn.rsplit("::", 1)[1] for urn in changed}
    assert {"deployment-kube-system-cluster-autoscaler", "deployment-kube-system-coredns", "dev-cp-apiserver"} <= names
    kinds = {old[urn].type for urn in changed}
    assert kinds <= {"azure-native:compute:VirtualMachineScaleSet", "kubernetes:apps/v1:Deployment",
                     "azure-native:virtualmachineimages:VirtualMachineImageTemplate", "kubernetes:helm.sh/v3:Release"}, kinds
    # The one release: Kueue's pods name the ProvisioningRequest CRD, which is cluster-autoscaler's at the minor's
    # tag, so they restart with it (a queue whose admission check is not Active admits nothing: docs/scheduling.md).
    assert {urn.rsplit("::", 1)[1] for urn in changed if old[urn].type == "kubernetes:helm.sh/v3:Release"} == {
        "dev-in-cluster-scheduling-kueue"}
    assert not [urn for urn in changed if old[urn].protect]
    protected = [urn for urn in old if old[urn].protect]
    assert protected, "the dev stack has protected etcd members"
    # The node images bake the stack's kubelet and kubeadm from the minor's pkgs.k8s.io repository: the image
    # templates change with the minor, and a version is built once (docs/images.md: a new minor is a new image version).
    baked = pins("gpu", "1.0.0", "1.36.4")
    assert (baked["KUBERNETES_VERSION"], baked["KUBERNETES_MINOR"]) == ("1.36.4", "1.36")


def test_boot_documents_use_the_tables_configuration_apis() -> None:
    """What kubeadm and the kubelet read is the API version the table checks against the minor."""
    from gpucluster.bootstrap.node import NodeBootstrap, kubelet_patch, render_cloud_init
    from gpucluster.catalog.versions import KUBEADM_API, KUBELET_CONFIG_API
    from tests.support.apiserver_documents import kubeadm_documents, render_apiserver_document
    init, cluster, kubelet = kubeadm_documents(render_apiserver_document(()))
    assert init["apiVersion"] == cluster["apiVersion"] == KUBEADM_API.version  # type: ignore[index]
    # the API servers' own kubelet reads the KubeletConfiguration kubeadm passes on from its config file
    assert (kubelet["kind"], kubelet["apiVersion"]) == ("KubeletConfiguration", KUBELET_CONFIG_API.version)  # type: ignore[index]
    node = NodeBootstrap("1.36.4", "10.0.0.4:6443", "abcdef.0123456789abcdef", "sha256:" + "0" * 64, 30, "10.96.0.10")
    assert kubelet_patch(node)["apiVersion"] == KUBELET_CONFIG_API.version
    assert f"apiVersion: {KUBEADM_API.version}" in render_cloud_init(node)


def test_docs_list_every_component_of_the_table() -> None:
    from gpucluster.catalog.versions import ADDONS, NODE_APIS
    text = (ROOT / "docs" / "versions.md").read_text()
    for component in (*ADDONS, *NODE_APIS, *(c for m in MINOR_COUPLED.values() for c in m.components)):
        assert component.name in text and component.version in text, component.key
    for release in KUBERNETES_RELEASES.values():
        assert f"| {release.minor} | {release.latest_patch} | {release.maintenance_start} | {release.end_of_life} |" in text


def test_plan_on_an_end_of_life_minor_exits_1_naming_the_rule(tmp_path) -> None:
    """End to end: the stack plans (every component supports 1.34) but the pack's mandatory rule fails."""
    stack = yaml.safe_load((STACKS / "Pulumi.dev.yaml").read_text())
    stack["config"]["gpucluster:cluster"]["kubernetesVersion"] = "1.34.6"
    path = tmp_path / "Pulumi.dev.yaml"
    path.write_text(yaml.safe_dump(stack))
    result = gpucluster("plan", str(path), "--out", str(tmp_path / "out"))
    assert result.returncode == 1, result.stdout + result.stderr
    assert "kubernetes-version-end-of-life: Kubernetes 1.34.6 reached end of life on 2026-10-27" in result.stdout
    assert "WARNING Kubernetes 1.34 reached end of life on 2026-10-27" in result.stdout


def test_an_unreleased_patch_is_a_plan_error() -> None:
    """The install script pins `kubelet=<version>-*` and `kubeadm=<version>-*` (pkgs.k8s.io): a patch newer than
    the table's latest release has no packages, and every machine would fail at boot."""
    release = KUBERNETES_RELEASES["1.36"]
    major, minor, patch = release.latest_patch.split(".")
    with pytest.raises(SpecError, match=r"is newer than .* the latest 1\.36 patch"):
        plan_cluster(spec_of(small_cluster(kubernetesVersion=f"{major}.{minor}.{int(patch) + 1}")))
    plan_cluster(spec_of(small_cluster(kubernetesVersion=release.latest_patch)))
