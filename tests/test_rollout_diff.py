"""`gpucluster diff` names the machines a change needs re-imaged and the head plan's waves that do it
(components/diff/rollout.py)."""

from __future__ import annotations

from rich.console import Console

from gpucluster.diff.render import diff_section, print_diff
from gpucluster.diff.rollout import rollout_delta
from tests.support.diff_scenarios import diff, side
from tests.support.scale_sets import is_scale_set


def test_a_patch_that_changes_only_the_api_servers_boot_rolls_only_them() -> None:
    result = diff("previous-patch", "dev")
    assert result.rollout is not None
    assert result.rollout["machines"] == {"apiserver": ["boot document"]}
    waves = result.rollout["waves"]
    assert [w["kind"] for w in waves] == ["apiserver"] * len(waves) and waves
    assert [w["instance"] for w in waves] == list(range(len(waves)))
    assert result.rollout["unplanned"] == [] and result.rollout["gpuHours"] == 0


def test_new_images_roll_every_machine_in_the_planned_order() -> None:
    result = diff("previous-patch", "new-images")
    assert result.rollout is not None
    head = side("new-images")
    planned = head.summary["rollout"]["waves"] if head.summary else []
    assert result.rollout["waves"] == planned, "every wave of the head plan, in its order"
    scale_sets = {u.rsplit("::", 1)[-1] for u, s in head.resources.items() if is_scale_set(s)}
    node_sets = {s for s in scale_sets if not s.endswith("-cp-apiserver")}
    assert node_sets | {"apiserver", "etcd-0", "etcd-1", "etcd-2"} == set(result.rollout["machines"])
    assert result.rollout["unplanned"] == []
    assert result.rollout["gpuHours"] == round(sum(w["gpuHours"] for w in planned), 1) > 0


def test_no_reimage_no_rollout() -> None:
    assert diff("dev", "zones-reordered").rollout is None


def test_a_head_without_a_rollout_says_so() -> None:
    head = side("dev")
    assert head.summary is not None
    del head.summary["rollout"]
    delta = rollout_delta(head, {"t4-z1-00": ["boot document"]})
    assert delta is not None and delta["unplanned"] == ["t4-z1-00"] and delta["note"]


def test_the_diff_prints_and_renders_the_waves() -> None:
    result = diff("previous-patch", "dev")
    console = Console(record=True, width=400)
    print_diff(console, result)
    text = console.export_text()
    assert "rollout: 1 scale sets or VMs need their instances re-imaged" in text
    assert "  wave 3: apiserver zone any: apiserver instance 0" in text  # after dev's three etcd members
    assert "apiserver instance 0" in diff_section(result.as_dict())
