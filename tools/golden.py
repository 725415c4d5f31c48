"""The shipped stacks' figures, in one golden file: tests/golden/stacks.json.

    python -m tools.golden          # regenerate after changing a shipped stack or what a plan computes
    python -m tools.golden --check  # exit 1 (with the changed keys) when the file is out of date

The file holds, per shipped stack (SHIPPED_STACKS: the ones this repository ships in stacks/), the plan
summary (`summary.json` without the stack outputs):
nodes, GPUs, pools and scale sets, the IP layout and its room, the control plane, quota, limits, zone loss,
policy results and resource counts. Tests elsewhere assert invariants (totals add up, no block moves,
names stable); this file is where the figures live, so a legitimate edit to a stack changes one file, by
one command, and the review shows what moved.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpucluster.offline.engine import ProgramRun

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests" / "golden" / "stacks.json"


SHIPPED_STACKS = ("dev", "gb300", "prod")
"""The stacks this repository ships, which the golden file, the README's Pulumi commands and the PR workflow's
tests cover. A stack of your own in stacks/ plans like them (`make plan STACK=<name>`) and none of those tests
fail for it; to ship a stack, add it here, run `python -m tools.golden` and give it its `pulumi preview`/`pulumi up`
lines in the README's "With the real Pulumi CLI"."""


def stack_names() -> list[str]:
    """The shipped stacks, each with its stack file."""
    missing = [s for s in SHIPPED_STACKS if not (ROOT / "stacks" / f"Pulumi.{s}.yaml").is_file()]
    if missing:
        raise SystemExit(f"shipped stacks without their stack file: {', '.join(missing)} (tools/golden.py "
                         "SHIPPED_STACKS lists stacks/Pulumi.<name>.yaml)")
    return sorted(SHIPPED_STACKS)


def figures(stack: str, run: ProgramRun | None = None) -> dict[str, Any]:
    """The summary `gpucluster plan <stack>` writes, without the stack outputs (keys, kubeconfig)."""
    from gpucluster.offline.engine import run_program
    from gpucluster.offline.policy_runner import run_policies
    from gpucluster.offline.preview import preview_document
    from gpucluster.report.lifetimes_report import DATED_KEYS
    from gpucluster.report.report_data import report_data
    from gpucluster.simulation.check import plan_checked
    from gpucluster.spec import load_stack_file

    loaded = load_stack_file(ROOT / "stacks" / f"Pulumi.{stack}.yaml", stack)
    plan = plan_checked(loaded.spec)
    if run is None:
        run = run_program(ROOT / "__main__.py", "gpucluster", stack, loaded.config)
    config_path = ROOT / "policies" / "config" / f"{stack}.json"
    config = json.loads(config_path.read_text(encoding="utf-8")) if config_path.is_file() else {}
    violations = run_policies(preview_document(run)["steps"], config)
    data = report_data(plan, stack, Counter(r.type for r in run.registrations if r.custom), violations, {})
    data.pop("outputs", None)
    # The tokens' dates follow the calendar (components/report/lifetimes_report.py): keep the schedule only.
    for key in DATED_KEYS:
        data.get("bootstrapTokens", {}).pop(key, None)
    # So do the cost's stale-price warnings (components/planning/cost.py): the figures stay.
    if data.get("cost"):
        data["cost"].pop("warnings", None)
    return json.loads(json.dumps(data, sort_keys=True))


def render(all_figures: dict[str, Any]) -> str:
    return json.dumps(all_figures, indent=1, sort_keys=True) + "\n"


def changed_keys(old: Any, new: Any, path: str = "") -> list[str]:
    """Where two figure trees differ, as dotted paths (first 40)."""
    if isinstance(old, dict) and isinstance(new, dict):
        out: list[str] = []
        for key in sorted(set(old) | set(new)):
            out += changed_keys(old.get(key), new.get(key), f"{path}.{key}" if path else key)
        return out[:40]
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        return [p for i, (a, b) in enumerate(zip(old, new, strict=True)) for p in changed_keys(a, b, f"{path}[{i}]")][:40]
    return [] if old == new else [f"{path}: {json.dumps(old)[:80]} -> {json.dumps(new)[:80]}"]


def main(argv: list[str] | None = None) -> int:
    from gpucluster.offline.mock_values import name_registries_offline

    name_registries_offline()
    parser = argparse.ArgumentParser(prog="python -m tools.golden", description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--check", action="store_true", help="compare instead of writing")
    args = parser.parse_args(argv)
    current = {stack: figures(stack) for stack in stack_names()}
    if args.check:
        stored = json.loads(GOLDEN.read_text(encoding="utf-8")) if GOLDEN.is_file() else {}
        diff = changed_keys(stored, current)
        for line in diff:
            print(line)
        return 1 if diff else 0
    GOLDEN.parent.mkdir(parents=True, exist_ok=True)
    GOLDEN.write_text(render(current), encoding="utf-8")
    print(f"wrote {GOLDEN.relative_to(ROOT)} ({', '.join(current)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
