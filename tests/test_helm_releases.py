"""Helm releases at the cluster's size: none can uninstall the CNI on a first install, and none waits for a readiness
rule a healthy cluster of the stack's size does not meet.

Rules: helm pkg/kube/ready.go `daemonSetReady` (ready >= desired - maxUnavailable, percentages rounded up); helm
pkg/action/install.go (v3) `i.Wait = i.Wait || i.Atomic` and `failRelease` uninstalling an atomic release;
pulumi-kubernetes provider/pkg/provider/helm_release.go (`client.Wait = !skipAwait`, `client.Atomic = atomic`)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from gpucluster.kubernetes.objects.releases import CILIUM_RELEASE, GPU_OPERATOR_RELEASE, KUEUE_RELEASE, RELEASES
from gpucluster.offline.engine import ProgramRun
from gpucluster.planning.cluster_plan import ClusterPlan
from gpucluster.simulation.bring_up_layer import releases_at_size
from gpucluster.simulation.check import plan_checked
from gpucluster.simulation.release_readiness import daemonset_ready, max_unavailable, scaled, tolerated_unready
from tests.support.stacks import stack_spec


@pytest.fixture(scope="module")
def prod() -> ClusterPlan:
    return plan_checked(stack_spec("prod"))


def test_helms_daemonset_rule() -> None:
    """ready.go: 3 slow agents of 7,505 with maxUnavailable 2 are not ready; a percentage rounds up."""
    assert daemonset_ready(7505, 7503, 2) and not daemonset_ready(7505, 7502, 2)
    assert scaled("10%", 7505) == 751 and scaled(2, 7505) == 2 and scaled("3", 10) == 3
    assert max_unavailable({"spec": {}}, 7505) == 1  # apps/v1 default: RollingUpdate, maxUnavailable 1
    assert max_unavailable({"spec": {"updateStrategy": {"type": "OnDelete"}}}, 7505) is None
    assert tolerated_unready(7505, 3, 10) == 750 and tolerated_unready(12, 3, 10) == 3


def test_the_earlier_releases_fail_at_prods_size(prod: ClusterPlan) -> None:
    """Atomic with a 15-minute wait: Cilium's agent on every node (maxUnavailable as the plan sizes it, 42) and NFD's
    worker (1) must be ready on all but a few of 7,500 nodes, and a failure uninstalls the release."""
    assert prod.bring_up is not None
    earlier = tuple(replace(o, atomic=True, wait=True) for o in RELEASES)
    problems = {(p.release, p.reason.split(":")[0]) for p in releases_at_size(prod, prod.bring_up, earlier)}
    assert ("cilium", "is atomic") in problems and ("kueue", "is atomic") in problems
    reasons = [p.reason for p in releases_at_size(prod, prod.bring_up, earlier) if p.release == "cilium"]
    nodes = prod.nodes + prod.control_plane.api.count  # the API servers run an agent too
    width = prod.cni_update.max_unavailable
    assert any(f"DaemonSet cilium-agent ready on {nodes - width} of {nodes} nodes" in r for r in reasons)
    assert any(p.release == "gpu-operator" and "DaemonSet nfd-worker" in p.reason
               for p in releases_at_size(prod, prod.bring_up, earlier))


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_the_shipped_releases_hold_at_the_stacks_size(stack: str) -> None:
    plan = plan_checked(stack_spec(stack))
    assert plan.bring_up is not None
    assert releases_at_size(plan, plan.bring_up, RELEASES) == []
    assert not any(o.atomic for o in RELEASES)
    # Kueue's objects pass its webhooks right after the release: that one waits, for two controller replicas.
    assert KUEUE_RELEASE.wait and not CILIUM_RELEASE.wait and not GPU_OPERATOR_RELEASE.wait


def test_the_declared_releases_carry_the_options(prod_run: ProgramRun) -> None:
    """What the provider receives: atomic false everywhere, skipAwait where the release does not wait."""
    releases = {r.inputs["name"]: r.inputs for r in prod_run.registrations if r.type == "kubernetes:helm.sh/v3:Release"}
    assert set(releases) == {o.chart for o in RELEASES}
    for o in RELEASES:
        inputs = releases[o.chart]
        assert inputs["atomic"] is False and inputs["skipAwait"] is (not o.wait)
        assert inputs["timeout"] == o.timeout_seconds and "cleanupOnFail" not in inputs


def test_the_layers_daemonsets_and_balloons_are_not_awaited(prod_run: ProgramRun) -> None:
    """pulumi-kubernetes provider/pkg/await/daemonset.go waits (10 minutes by default) until kstatus calls the
    DaemonSet Current: every desired pod available, on all 3,125 H100 nodes for a health DaemonSet whose pods run
    GPU diagnostics first. Balloons are ready only on nodes that passed them. Both are created without the wait."""
    from gpucluster.vocabulary import ANNOTATION_SKIP_AWAIT
    workloads = [r for r in prod_run.registrations
                 if r.type in ("kubernetes:apps/v1:DaemonSet", "kubernetes:apps/v1:Deployment")]
    skipped = {r.inputs["metadata"]["name"] for r in workloads
               if (r.inputs["metadata"].get("annotations") or {}).get(ANNOTATION_SKIP_AWAIT) == "true"}
    daemonsets = {r.inputs["metadata"]["name"] for r in workloads if r.type.endswith("DaemonSet")}
    assert daemonsets and daemonsets <= skipped
    balloons = {n for n in {r.inputs["metadata"]["name"] for r in workloads} if n.startswith("balloon-")}
    assert balloons and balloons <= skipped and "coredns" not in skipped


def test_the_charts_folder_names_each_release_as_helm_installs_it(prod_run: ProgramRun, tmp_path: Path) -> None:
    """out/<stack>/charts/<resource>.yaml: `release` is the name Helm installs the chart under (the Release's `name`),
    which `helm template <release>` must be given for the objects to carry the installed names; the Pulumi resource's
    name, which differs, only names the file."""
    from gpucluster.offline.manifests import helm_releases, write_charts

    releases = helm_releases(prod_run.registrations)
    written = {p.name: yaml.safe_load(p.read_text()) for p in write_charts(releases, tmp_path)}
    declared = {r.name: r.inputs["name"] for r in prod_run.registrations if r.type == "kubernetes:helm.sh/v3:Release"}
    assert declared and {f"{k}.yaml": v for k, v in declared.items()} == {n: d["release"] for n, d in written.items()}
    assert any(resource != release for resource, release in declared.items()), "the two names differ"
