"""`diff` costs what its output holds, not a path per value of both sides: changed paths are found by walking both
sides together (with the semantics of a leaf-by-leaf comparison), at most MAX_CHANGED_PATHS a resource, and renamed
pools are matched by VM size, one flag per pool that disappears."""

from __future__ import annotations

from typing import Any

from gpucluster.diff.compare import MAX_CHANGED_PATHS, changed_paths, diff_sides
from gpucluster.diff.sides import Side
from gpucluster.policies.rules.props import SCALE_SET
from gpucluster.vocabulary import POOL_TAG


def test_changed_paths_compare_leaf_by_leaf() -> None:
    old = {"a": {"b": 1, "c": [1, 2]}, "d": {}, "e": {"x": 1}, "f": [1], "same": {"deep": [{"k": "v"}]}}
    new = {"a": {"b": 2, "c": [1]}, "d": [], "e": 5, "f": {"0": 1}, "g": None, "same": {"deep": [{"k": "v"}]}}
    assert changed_paths(old, new, []) == ["a.b", "a.c[1]", "d", "e", "e.x", "f.0", "f[0]", "g"]
    assert changed_paths(old, new, ["a", "e"]) == ["d", "f.0", "f[0]", "g"]
    assert changed_paths(old, new, ["a.c"]) == ["a.b", "d", "e", "e.x", "f.0", "f[0]", "g"]


def test_changed_paths_stop_at_the_bound() -> None:
    old = {"x": [{"v": i} for i in range(50_000)]}
    new = {"x": [{"v": -i - 1} for i in range(50_000)]}
    paths = changed_paths(old, new, [])
    assert len(paths) == MAX_CHANGED_PATHS and all(p.startswith("x[") and p.endswith("].v") for p in paths)


def _scale_sets(pools: dict[str, str]) -> dict[str, dict[str, Any]]:
    return {f"urn:pulumi:dev::p::{SCALE_SET}::{pool}-z1-00": {
        "urn": f"urn:pulumi:dev::p::{SCALE_SET}::{pool}-z1-00", "type": SCALE_SET, "custom": True,
        "inputs": {"sku": {"name": size, "capacity": 1}, "tags": {POOL_TAG: pool}}} for pool, size in pools.items()}


def test_a_renamed_pool_is_one_flag_naming_its_twins() -> None:
    base = Side("base", _scale_sets({"h100": "Standard_ND96isr_H100_v5", "cpu": "Standard_D4s_v5"}), {})
    head = Side("head", _scale_sets({f"h100-{i}": "Standard_ND96isr_H100_v5" for i in range(7)}
                                    | {"cpu": "Standard_D4s_v5"}), {})
    renamed = [f for f in diff_sides(base, head).flags if f.source == "renamed-scale-set"]
    assert len(renamed) == 1 and renamed[0].path == "h100"
    assert "pool h100-0, h100-1, h100-2, h100-3, h100-4 and 2 more of the same VM size appears" in renamed[0].message
