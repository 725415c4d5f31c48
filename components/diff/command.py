"""`gpucluster diff BASE HEAD` and the `--base` comparison of `gpucluster plan`."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console

from gpucluster.errors import Problem, SpecError

if TYPE_CHECKING:  # the CLI imports this module at start; the diff machinery loads when used
    from gpucluster.diff.compare import PlanDiff
    from gpucluster.diff.sides import Side

EXIT_OK, EXIT_BAD_INPUT = 0, 2


def add_parser(sub: Any) -> None:
    diff = sub.add_parser("diff", help="compare two plans (plan folders or preview files): what a change does")
    diff.add_argument("base", help="the base: a `gpucluster plan --out` folder or a preview.json")
    diff.add_argument("head", help="the head, likewise")
    diff.add_argument("--json", action="store_true", help="print the diff as JSON")
    diff.add_argument("--across-stacks", action="store_true",
                      help="compare plans of different stacks or clusters anyway, matching resources by type and name")


def _not_comparable(base: Side, head: Side, fix: str) -> SpecError | None:
    from gpucluster.diff.comparable import why_not_comparable

    why = why_not_comparable(base, head)
    return None if why is None else SpecError.at(f"{base.label} -> {head.label}", f"not comparable: {why}; {fix}")


def cmd_diff(args: argparse.Namespace, console: Console, errors: Console) -> int:
    from gpucluster.diff.comparable import ANYWAY_FLAG, onto, why_not_comparable
    from gpucluster.diff.compare import diff_sides
    from gpucluster.diff.render import print_diff
    from gpucluster.diff.sides import load_side
    from gpucluster.diff.visible import visible

    try:
        base, head = load_side(args.base), load_side(args.head)
        if not args.across_stacks and (refused := _not_comparable(
                base, head, f"diff two plans of one stack, or pass {ANYWAY_FLAG} to match resources by type and "
                            "name anyway")):
            raise refused
    except SpecError as error:
        for problem in error.problems:  # names and paths from the documents: shown, never sent raw
            errors.print(visible(f"error: {problem}"), markup=False, highlight=False, emoji=False, soft_wrap=True)
        return EXIT_BAD_INPUT
    across = why_not_comparable(base, head)
    diff = diff_sides(onto(base, head), head)
    if across:
        diff.notes.append(f"compared anyway ({ANYWAY_FLAG}): {across}; resources are matched by type and name")
    if args.json:
        print(json.dumps(diff.as_dict(), indent=2, sort_keys=True))
    else:
        print_diff(console, diff)
    return EXIT_BAD_INPUT if diff.errors else EXIT_OK


def check_base(base_folder: str | None) -> None:
    """Before any work: `--base` must be a plan folder."""
    if base_folder and not (Path(base_folder) / "preview.json").is_file():
        raise SpecError.at("--base", f"{base_folder} holds no preview.json; give the folder `gpucluster plan --out` "
                                     "wrote for the base")


def diff_against_base(base_folder: str | None, document: dict[str, Any], data: dict[str, Any],
                      boot: dict[str, str] | None = None) -> PlanDiff | None:
    """`gpucluster plan --base DIR`: the plan just made against the base plan; the diff goes into `data`
    (summary.json and report.html). `boot`: this plan's boot documents (what it writes to boot/), compared line by
    line with the base's boot/. Its errors are plan errors: they come back as a SpecError."""
    from gpucluster.diff.compare import diff_sides
    from gpucluster.diff.sides import load_side, side_from_document

    if not base_folder:
        return None
    base = load_side(base_folder)
    head = side_from_document("this plan", document, data, boot)
    refused = _not_comparable(base, head, "give --base the plan folder of the same stack")
    if refused is not None:
        raise refused
    diff = diff_sides(base, head)
    data["diff"] = diff.as_dict()
    return diff


def refusals(diff: PlanDiff) -> SpecError | None:
    """The diff's errors as plan problems (one line each, naming the resource and the fix)."""
    if not diff.errors:
        return None
    return SpecError([Problem(f"{f.source} {f.path}", f"{f.message}" + (f"; fix: {f.fix}" if f.fix else ""),
                              source=f.source) for f in diff.errors])
