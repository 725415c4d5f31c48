"""A dev stack can grow: its T4 pool from 2 to 3 to 4 nodes passes the policy pack, and plans with exit 0.

With 3 T4s (zones 1, 2, 3) beside the confidential GPU (zone 3), the cluster has 4 GPUs in 3 zones: some zone
holds 2 (50%) however whole machines are placed, and the GPU zone-share rule, asking for at most 40%, refused
every such placement. The rule now allows a zone its even share plus part of one machine
(policies/rules/failure_domains.py), and still refuses a placement that another one would improve.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from gpucluster.offline.engine import ProgramRun, run_program
from gpucluster.offline.policy_runner import run_policies
from gpucluster.offline.preview import preview_document
from gpucluster.policies.rules import ALL_POLICIES
from gpucluster.spec import load_stack_file
from gpucluster.vocabulary import AUTOSCALER_GPUS_TAG
from tests.support.stacks import ROOT, STACKS, plan_stack

RULE = "azure-native-compute-virtualmachinescaleset-gpu-zone-share"
VMSS = "azure-native:compute:VirtualMachineScaleSet"
ZONE_SHARE = [p for p in ALL_POLICIES if p.name == RULE]


def _gpu_set(name: str, zone: str, machines: int, gpus: int, role: str = "gpu") -> dict[str, Any]:
    urn = f"urn:pulumi:dev::gpucluster::{VMSS}::{name}"
    inputs = {"zones": [zone], "sku": {"name": "Standard_X", "capacity": machines},
              "tags": {"gpucluster-role": role, AUTOSCALER_GPUS_TAG: str(gpus)}}
    return {"op": "create", "urn": urn, "newState": {"urn": urn, "type": VMSS, "custom": True, "inputs": inputs}}


def _refused(*sets: dict[str, Any]) -> list[str]:
    return [v.message for v in run_policies(list(sets), None, ZONE_SHARE)]


def test_a_cluster_too_small_to_split_finer_passes() -> None:
    """dev at 3 T4s: 4 single-GPU machines over 3 zones, 2 of them in zone 3 (50%, the best whole machines do)."""
    assert _refused(_gpu_set("t4-z1-00", "1", 1, 1), _gpu_set("t4-z2-00", "2", 1, 1), _gpu_set("t4-z3-00", "3", 1, 1),
                    _gpu_set("confidential-z3-00", "3", 1, 1, "confidential")) == []
    assert _refused(_gpu_set("h100-z1-00", "1", 1, 8)) == []  # one machine cannot be spread


@pytest.mark.parametrize(("sets", "zone"), [
    ([("a", "1", 3, 1), ("b", "2", 1, 1)], "1"),  # 3 of 4 in zone 1, where 2, 1, 1 would do
    ([("a", "1", 1, 8), ("b", "1", 1, 8)], "1"),  # both 8-GPU machines in zone 1, where one per zone would do
    ([("a", "1", 40, 8), ("b", "2", 20, 8), ("c", "3", 20, 8)], "1"),  # 50% of a large cluster
])
def test_a_placement_another_would_improve_is_still_refused(sets: list[tuple[str, str, int, int]], zone: str) -> None:
    messages = _refused(*(_gpu_set(*s) for s in sets))
    assert len(messages) == 1 and messages[0].startswith(f"zone {zone} holds"), messages


def _dev_with_t4(count: int, folder: Path) -> Path:
    text = (STACKS / "Pulumi.dev.yaml").read_text()
    grown, replaced = re.subn(r"(vmSize: Standard_NC4as_T4_v3\n        count: )2\n", rf"\g<1>{count}\n", text)
    assert replaced == 1
    path = folder / f"t4-{count}" / "Pulumi.dev.yaml"
    path.parent.mkdir()
    path.write_text(grown)
    return path


@pytest.mark.parametrize("count", [2, 4])
def test_dev_grown_passes_every_mandatory_policy(count: int, tmp_path: Path, dev_run: ProgramRun) -> None:
    """The program under the offline engine and the whole pack with dev's own config, as `plan` runs them (at 2,
    dev itself: the run the other tests share; at 3, `plan` itself below, whose exit 0 means no mandatory rule
    failed)."""
    if count == 2:
        run = dev_run
    else:
        stack = load_stack_file(_dev_with_t4(count, tmp_path), "dev")
        run = run_program(ROOT / "__main__.py", "gpucluster", "dev", stack.config)
    config = json.loads((ROOT / "policies" / "config" / "dev.json").read_text())
    violations = run_policies(preview_document(run)["steps"], config)
    assert [v.source for v in violations if v.mandatory] == []


def test_dev_with_3_t4_nodes_plans_with_exit_0(tmp_path: Path) -> None:
    result = plan_stack(_dev_with_t4(3, tmp_path), tmp_path / "out")
    assert result.returncode == 0, result.stdout + result.stderr
    assert RULE not in result.stdout
