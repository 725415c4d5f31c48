"""vCPU quota the subscription declares, and pinned source images.

Azure arranges vCPU quota in two tiers per region: Total Regional vCPUs (`cores` in `az vm list-usage`) and
one per VM-size family; a VM past either is refused (azure-docs articles/virtual-machines/quotas.md). Spot
VMs count against the regional low-priority quota instead.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from gpucluster.catalog import images
from gpucluster.errors import SpecError
from gpucluster.planning.cluster_plan import plan_cluster
from gpucluster.spec import ImageRef
from tests.support.plan_sides import stack_raw
from tests.support.stacks import plan_stack, small_cluster, spec_of


def test_quota_rows_include_the_regional_total() -> None:
    plan = plan_cluster(spec_of(small_cluster()))
    rows = {q.family: q.vcpus for q in plan.quota}
    assert rows["cores"] == sum(v for f, v in rows.items() if f not in ("cores", "lowPriorityCores"))
    assert rows["standardNDSH100v5Family"] == 150 * 96


def test_a_declared_quota_below_the_need_fails_the_plan_naming_family_need_and_quota() -> None:
    raw = small_cluster(vcpuQuota={"standardNDSH100v5Family": 4_800, "cores": 1_000_000})
    with pytest.raises(SpecError) as caught:
        plan_cluster(spec_of(raw))
    [problem] = caught.value.problems
    assert problem.path == "cluster.vcpuQuota.standardNDSH100v5Family"
    assert "needs 14,400 standardNDSH100v5Family vCPUs in eastus but the declared quota is 4,800 (short by 9,600)" \
        in problem.message


def test_the_regional_total_is_checked_too() -> None:
    raw = small_cluster(vcpuQuota={"cores": 10_000})
    with pytest.raises(SpecError) as caught:
        plan_cluster(spec_of(raw))
    assert [p.path for p in caught.value.problems] == ["cluster.vcpuQuota.cores"]


def test_quota_shortfall_exits_2_and_writes_nothing(tmp_path: Path) -> None:
    raw = stack_raw("dev")
    raw["vcpuQuota"] = {"standardNCASv3_T4Family": 4}
    stack = tmp_path / "Pulumi.dev.yaml"
    stack.write_text(yaml.safe_dump({"config": {"azure-native:location": "eastus2", "gpucluster:cluster": raw}}))
    out = tmp_path / "out"
    result = plan_stack(stack, out)
    assert result.returncode == 2 and not out.exists()
    assert "cluster.vcpuQuota.standardNCASv3_T4Family: the stack needs 8" in result.stderr
    assert "Traceback" not in result.stderr


def test_catalogue_images_are_pinned() -> None:
    """The marketplace images the node images are baked from name a version: a rebuild starts from the same bits."""
    pinned = [v for v in vars(images).values() if isinstance(v, ImageRef)]
    # Ubuntu-HPC for the GPU images, its arm64 GB build for the rack image, Ubuntu for the CPU and confidential ones.
    assert len(pinned) == 4 and all(i.version != "latest" for i in pinned)
