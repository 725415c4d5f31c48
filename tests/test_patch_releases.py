"""Kubernetes patch releases taken from the stack, checked against the version table (docs/versions.md).

The install script pins `kubelet=<version>-*` and `kubeadm=<version>-*` from pkgs.k8s.io: a patch the table
does not know may have no packages yet, so it needs the stack's confirmation, which the plan then shows.
"""

from __future__ import annotations

from datetime import date

import pytest

from gpucluster.catalog.versions import KUBERNETES_RELEASES
from gpucluster.errors import SpecError
from gpucluster.planning.cluster_plan import plan_cluster
from gpucluster.report.versions_report import version_warnings, versions_data
from tests.support.stacks import small_cluster, spec_of

LATEST = KUBERNETES_RELEASES["1.36"].latest_patch
NEXT = "1.36." + str(int(LATEST.split(".")[2]) + 1)
SOURCE = "kubernetes.io/releases lists it; apt-cache madison kubeadm shows it, 2026-12-12"


def test_every_patch_up_to_the_tables_newest_plans() -> None:
    for patch in range(int(LATEST.split(".")[2]) + 1):
        assert plan_cluster(spec_of(small_cluster(kubernetesVersion=f"1.36.{patch}"))).versions.patch_verified \
            is None


def test_a_newer_patch_needs_the_stacks_confirmation() -> None:
    with pytest.raises(SpecError, match=r"or confirm this one and say where under cluster.kubernetesPatchVerified"):
        plan_cluster(spec_of(small_cluster(kubernetesVersion=NEXT)))


def test_a_confirmed_patch_plans_and_the_summary_says_so() -> None:
    raw = small_cluster(kubernetesVersion=NEXT, kubernetesPatchVerified={"version": NEXT, "source": SOURCE})
    plan = plan_cluster(spec_of(raw))
    assert plan.versions.patch_verified == SOURCE
    data = versions_data(plan)
    assert data["kubernetes"]["version"] == NEXT
    warnings = version_warnings(data, date(2026, 12, 12))
    assert warnings[0] == (f"Kubernetes {NEXT} is newer than the version table's {LATEST}; the stack confirms it "
                           f"(cluster.kubernetesPatchVerified): {SOURCE}")
