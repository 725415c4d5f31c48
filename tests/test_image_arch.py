"""Each pool's architecture against the platforms of every image the first boot places there
(components/simulation/image_arch.py): GB300 racks are arm64 (Grace), so an amd64-only image on them fails the plan.
The agents image is declared multi-arch wherever a pool is arm64 (its health checks run on every GPU pool)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gpucluster.catalog import image_platforms
from gpucluster.catalog.image_platforms import AMD64, ARM64, ImagePlatforms
from gpucluster.errors import SpecError
from gpucluster.kubernetes.objects.layer import layer_objects
from gpucluster.planning.cluster_plan import ClusterPlan, plan_cluster
from gpucluster.simulation.bring_up_layer import bring_up
from gpucluster.simulation.check import check_plan
from gpucluster.simulation.image_arch import architecture_problems, pool_platforms
from tests.support.stacks import stack_spec


@pytest.fixture(scope="module")
def gb300() -> ClusterPlan:
    return plan_cluster(stack_spec("gb300"))


def _problems(plan: ClusterPlan) -> list[str]:
    return [p.message for p in architecture_problems(plan, bring_up(plan), layer_objects(plan))]


def test_rack_pools_are_arm64_and_the_agents_image_is_built_for_both(gb300: ClusterPlan) -> None:
    assert pool_platforms(gb300) == {"gb300": ARM64, "system": AMD64, "apiservers": AMD64}
    assert gb300.registry.agents_platforms == (AMD64, ARM64)
    assert plan_cluster(stack_spec("prod")).registry.agents_platforms == (AMD64,)
    assert _problems(gb300) == []


def test_an_amd64_only_agents_image_on_racks_fails_the_plan(gb300: ClusterPlan) -> None:
    """As the registry built it before: a plain `docker build` on an amd64 workstation."""
    amd64_only = replace(gb300, registry=replace(gb300.registry, agents_platforms=(AMD64,)))
    assert _problems(amd64_only) == [
        "gpu-health-gb300 runs on pool gb300 (linux/arm64 machines), but gpucluster/agents is built for linux/amd64 "
        "only"]
    with pytest.raises(SpecError) as error:
        check_plan(amd64_only)
    assert "gpu-health-gb300 runs on pool gb300" in str(error.value.problems[0])


def test_an_amd64_only_chart_image_on_racks_fails_the_plan(gb300: ClusterPlan, monkeypatch: pytest.MonkeyPatch) -> None:
    toolkit = "nvcr.io/nvidia/k8s/container-toolkit"
    monkeypatch.setitem(image_platforms.UPSTREAM_PLATFORMS, toolkit, ImagePlatforms(frozenset({AMD64}), "test"))
    assert _problems(gb300) == [
        f"nvidia-container-toolkit runs on pool gb300 (linux/arm64 machines), but {toolkit} is built for linux/amd64 "
        "only"]


def test_every_catalogued_image_on_racks_is_built_for_arm64(gb300: ClusterPlan) -> None:
    """What the shipped GB300 stack places on its racks and whose platforms were read: all arm64."""
    placed = {w for w, pools in bring_up(gb300).placements().items() if "gb300" in pools}
    assert {"cilium-agent", "node-local-dns", "nfd-worker", "nvidia-container-toolkit", "nvidia-device-plugin",
            "gpu-health-gb300"} <= placed
    for entry in image_platforms.UPSTREAM_PLATFORMS.values():
        assert ARM64 in entry.platforms and entry.source


def test_an_amd64_only_rack_chart_image_fails_the_plan(gb300: ClusterPlan, monkeypatch: pytest.MonkeyPatch) -> None:
    """The DRA driver and DRANET run on rack nodes only; their images are held against the racks' architecture."""
    dranet = "registry.k8s.io/networking/dranet"
    monkeypatch.setitem(image_platforms.UPSTREAM_PLATFORMS, dranet, ImagePlatforms(frozenset({AMD64}), "test"))
    assert _problems(gb300) == [
        f"dranet runs on pool gb300 (linux/arm64 machines), but {dranet} is built for linux/amd64 only"]
