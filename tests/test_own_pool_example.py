"""examples/own_pool/: a CPU pool in the program's own VNet, planned on its own (`plan_pool`) and joined to a
GpuCluster with what the cluster publishes (`GpuCluster.node_join`), run under Pulumi's mocks
(components/offline/engine.py) as `pulumi up` would run it. Its scale sets are the cluster's kind of scale sets: in
the program's subnet, in the cluster's resource group, with the cluster's pull identity, image and join facts. A GPU
pool is refused: nothing in the cluster's layer would take its preflight taint off."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpucluster.offline.engine import ProgramRun, Registration, run_program
from gpucluster.offline.preview import preview_document

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "own_pool"
SCALE_SET = "Microsoft.Compute/virtualMachineScaleSets"


@pytest.fixture(scope="module")
def example_run() -> ProgramRun:
    return run_program(EXAMPLE / "__main__.py", "own-pool", "example", {})


def _scale_sets(run: ProgramRun, prefix: str) -> list[Registration]:
    return [r for r in run.registrations if r.type == "pulumi-python:dynamic:Resource"
            and r.inputs.get("armType") == SCALE_SET and r.name.startswith(prefix)]


def test_the_own_pool_is_three_scale_sets_in_the_programs_subnet(example_run: ProgramRun) -> None:
    own = _scale_sets(example_run, "cpu-own-")
    assert sorted(r.name for r in own) == ["cpu-own-z1-00", "cpu-own-z2-00", "cpu-own-z3-00"]
    subnet = next(r for r in example_run.registrations if r.type == "azure-native:network:Subnet"
                  and r.name == "cpu-own")
    assert subnet.inputs["addressPrefix"] == "10.90.0.0/22"
    assert set(example_run.outputs["ownScaleSetIds"]) and len(example_run.outputs["ownScaleSetIds"]) == 3


DIFFER = ("subnet", "customData", "computerNamePrefix", "vmScaleSetName", "tags", "keyData")
"""What the two pools are expected to differ in: names, subnets, boot documents, the tags that carry the pool's name,
and the admin key (the example's own; the cluster generates one when its stack names none)."""


def _without(value: object) -> object:
    if isinstance(value, dict):
        return {k: _without(v) for k, v in value.items() if k not in DIFFER}
    if isinstance(value, list):
        return [_without(v) for v in value]
    return value


def test_it_is_shaped_as_the_clusters_own_cpu_pool(example_run: ProgramRun) -> None:
    """Zone by zone, the same inputs as the cluster's cpu scale sets but for the names, the subnet, the boot document
    and the tags that carry the pool's name (and the admin key): same size, image, identities, NICs, disks and resource
    group."""
    own = {r.name.removeprefix("cpu-own-"): r for r in _scale_sets(example_run, "cpu-own-")}
    theirs = {r.name.removeprefix("cpu-"): r for r in _scale_sets(example_run, "cpu-z")}
    assert own.keys() == theirs.keys() == {"z1-00", "z2-00", "z3-00"}
    for zone, mine in own.items():
        assert _without(mine.inputs) == _without(theirs[zone].inputs), zone
        subnets = {c["subnet"]["id"] for nic in mine.inputs["virtualMachineProfile"]["networkProfile"][
            "networkInterfaceConfigurations"] for c in nic["ipConfigurations"]}
        assert len(subnets) == 1 and "/virtualNetworks/own" in subnets.pop()
        assert mine.inputs["resourceGroupName"] == "gpucluster-research"
        assert mine.inputs["tags"]["gpucluster-pool"] == "cpu-own" and mine.inputs["tags"]["gpucluster-cluster"] == \
            "research"


def test_its_boot_document_is_its_own(example_run: ProgramRun) -> None:
    """The customData is secret in the preview: what it holds is held by the pool_join equivalence test below; here,
    only that the own pool's document is not a copy of the cluster's pool's (its labels name its own pool)."""
    document = preview_document(example_run)
    digests = document["secretDigests"]
    own = [u for u in digests if "cpu-own-z1-00" in u]
    theirs = [u for u in digests if u.endswith("::cpu-z1-00")]
    assert own and theirs and digests[own[0]] != digests[theirs[0]]


def test_a_subnet_too_small_for_the_pool_stops_the_program(tmp_path: Path) -> None:
    program = (EXAMPLE / "__main__.py").read_text().replace('IPv4Network("10.90.0.0/22")', 'IPv4Network("10.90.0.0/27")')
    (tmp_path / "__main__.py").write_text(program)
    (tmp_path / "Pulumi.yaml").write_text((EXAMPLE / "Pulumi.yaml").read_text())
    with pytest.raises(Exception) as stopped:
        run_program(tmp_path / "__main__.py", "own-pool", "example", {})
    assert "NodePoolArgs.subnet_cidr" in str(stopped.value) and "10.90.0.0/27" in str(stopped.value)


def test_a_pool_joined_on_its_own_joins_as_the_clusters_own() -> None:
    """For a pool of the cluster's own plan, `pool_join` from the cluster's published join gives each scale set the
    join facts and image `cluster_join` gives it from the whole plan."""
    from gpucluster.azure.scale_set.join import cluster_join, pool_join
    from gpucluster.planning.cluster_plan import plan_cluster
    from gpucluster.planning.placement import plan_pool
    from tests.support.stacks import stack_spec

    plan = plan_cluster(stack_spec("prod"))
    whole = cluster_join(plan, "abcdef.0123456789abcdef", "sha256:" + "0" * 64, "client", "tenant")
    for pool in (p for p in plan.pools if p.size.gpus == 0):
        alone = pool_join(whole.cluster, whole.registry, pool, plan.spec.location, plan.images.pools[pool.name])
        assert alone.nodes == {s.name: whole.nodes[s.name] for s in pool.scale_sets}, pool.name
        assert alone.images == {s.name: whole.images[s.name] for s in pool.scale_sets}, pool.name
    h100 = next(p for p in plan.pools if p.name == "h100")
    replanned = plan_pool(h100.spec, plan.spec.location, plan.spec.zones)
    assert [s.name for s in replanned.scale_sets] == [s.name for s in h100.scale_sets]  # the same planner


def test_a_gpu_pool_on_its_own_is_refused() -> None:
    from gpucluster.azure.scale_set.join import cluster_join, pool_join
    from gpucluster.errors import SpecError
    from gpucluster.planning.cluster_plan import plan_cluster
    from tests.support.stacks import stack_spec

    plan = plan_cluster(stack_spec("prod"))
    whole = cluster_join(plan, "abcdef.0123456789abcdef", "sha256:" + "0" * 64, "client", "tenant")
    h100 = next(p for p in plan.pools if p.name == "h100")
    with pytest.raises(SpecError) as refused:
        pool_join(whole.cluster, whole.registry, h100, plan.spec.location, plan.images.pools["h100"])
    assert "preflight taint" in refused.value.problems[0].message


def test_a_pool_planned_alone_is_refused_with_its_own_paths() -> None:
    from gpucluster.errors import SpecError
    from gpucluster.planning.placement import plan_pool
    from gpucluster.spec import PoolKind, PoolSpec

    cpu = PoolSpec(name="cpu-own", kind=PoolKind.GPU, vm_size="Standard_D16ds_v5", count=6)
    with pytest.raises(SpecError) as wrong_size:
        plan_pool(cpu, "eastus2", ["1", "2", "3"])
    assert [p.path for p in wrong_size.value.problems] == ["pool.vmSize"]
    with pytest.raises(SpecError) as wrong_zone:
        plan_pool(cpu.model_copy(update={"kind": PoolKind.CPU}), "eastus2", ["1", "4"])
    assert [str(p) for p in wrong_zone.value.problems] == ["zones[1]: zone '4' does not exist in eastus2 (zones: 1, 2, 3)"]
