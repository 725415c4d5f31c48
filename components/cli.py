"""The `gpucluster` command: `plan` a stack offline, `check` a saved preview against the policy pack, `diff` two plans,
`verify` a deployed stack against its plan."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from collections import Counter
from pathlib import Path

from rich.console import Console

from gpucluster.diff.command import add_parser as add_diff_parser
from gpucluster.diff.command import cmd_diff
from gpucluster.errors import Problem, SpecError
from gpucluster.project import project_root
from gpucluster.verify.command import add_parser as add_verify_parser
from gpucluster.verify.command import cmd_verify

EXIT_OK, EXIT_POLICY, EXIT_BAD_INPUT = 0, 1, 2
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report it
PROJECT = "gpucluster"


def _fail(problems: SpecError, console: Console) -> int:
    for problem in problems.problems:
        console.print(f"error: {problem}", markup=False, highlight=False, emoji=False)  # `:key:` stays text
    return EXIT_BAD_INPUT


def cmd_plan(args: argparse.Namespace, console: Console, errors: Console) -> int:
    from gpucluster.diff.command import check_base, diff_against_base, refusals
    from gpucluster.diff.render import print_diff
    from gpucluster.offline.boot_docs import boot_documents, write_boot_documents
    from gpucluster.offline.engine import run_program
    from gpucluster.offline.first_up import first_up, write_runner_files
    from gpucluster.offline.manifests import helm_releases, kubernetes_objects, write_charts, write_manifests
    from gpucluster.offline.output import check_output_folder, output_path, write_output
    from gpucluster.offline.policy_config import read_policy_config, stack_policy_config
    from gpucluster.offline.policy_runner import run_policies
    from gpucluster.offline.preview import preview_document, write_preview
    from gpucluster.offline.program_check import check_program, new_states
    from gpucluster.offline.progress import Progress
    from gpucluster.offline.removals import KEY as REMOVALS_KEY
    from gpucluster.offline.removals import find_uses, removals_data
    from gpucluster.preflight import run_preflight
    from gpucluster.preflight.report import KEY as PREFLIGHT_KEY
    from gpucluster.preflight.report import print_warnings, warning_rows
    from gpucluster.report.html_report import render_report
    from gpucluster.report.report_data import report_data
    from gpucluster.report.summary import print_summary, print_violations
    from gpucluster.simulation.check import plan_checked
    from gpucluster.spec import load_stack_file, resolve_stack_path
    from gpucluster.spec.namesakes import namesake_warning

    progress = Progress(errors, enabled=not (args.quiet or args.json))
    root = project_root()
    try:
        name, path = resolve_stack_path(args.stack, root / "stacks")
    except SpecError as error:
        return _fail(error, errors)
    try:
        out = output_path(args.out, name)
        check_output_folder(out)  # before the plan runs: what is there, writable, not held by another process
        given = read_policy_config(Path(args.policy_config)) if args.policy_config else None
        check_base(args.base)
    except SpecError as error:
        return _fail(error, errors)
    progress.stage(f"planning stack {name} from {path}")
    try:
        stack = load_stack_file(path, name)
        plan = plan_checked(stack.spec)
        config_path = stack_policy_config(stack.config, name, root)
    except SpecError as error:
        errors.print(f"{path}:", markup=False, highlight=False, emoji=False)
        return _fail(error, errors)
    try:
        policy_config = given if given is not None else read_policy_config(config_path) if config_path else {}
    except SpecError as error:
        return _fail(error, errors)
    progress.stage(f"running {root / '__main__.py'} under mocks: {plan.nodes:,} nodes, "
                   f"{sum(len(p.scale_sets) for p in plan.pools)} scale sets")
    try:
        run = run_program(root / "__main__.py", PROJECT, name, stack.config,
                          progress.counting(f"{plan.nodes:,} nodes"))
    finally:
        progress.done_counting()
    progress.stage(f"registered {len(run.registrations)} resources; checking policies")
    document = preview_document(run)
    # What Azure would refuse, a first boot that cannot come up, a file an image lacks, what the minor no longer
    # serves: exit 2, nothing written. The same checks `pulumi up` and `check --stack` run
    # (components/offline/program_check.py).
    if problems := check_program(plan, new_states(document)):
        return _fail(SpecError(problems), errors)
    checked = run_preflight(document["steps"], plan)  # its warnings go to the report
    objects = kubernetes_objects(run.registrations)
    releases = helm_releases(run.registrations)
    documents = boot_documents(plan)
    uses = find_uses(objects, releases, documents)
    violations = run_policies(document["steps"], policy_config)
    data = report_data(plan, name, Counter(r.type for r in run.registrations if r.custom), violations, run.outputs)
    data[PREFLIGHT_KEY] = warning_rows(checked.warnings)
    data[REMOVALS_KEY] = removals_data(uses, plan.versions.kubernetes_version)
    pack = "--policy-pack policies" + (f" --policy-pack-config {config_path.relative_to(root)}"
                                       if config_path and config_path.is_relative_to(root) else "")
    relative_config = str(config_path.relative_to(root)) if config_path and config_path.is_relative_to(root) else ""
    data["firstUp"] = first_up(run.registrations, stack.spec, pack, name, relative_config)
    try:  # --base: what this plan changes against the base plan; what Azure would refuse stops here
        base_diff = diff_against_base(args.base, document, data, documents)
        if base_diff is not None and (refused := refusals(base_diff)) is not None:
            raise refused
    except SpecError as error:
        return _fail(error, errors)

    def write(folder: Path) -> None:
        write_preview(document, folder / "preview.json")
        write_manifests(objects, folder / "manifests")
        write_charts(releases, folder / "charts")
        write_boot_documents(plan, folder, documents)
        write_runner_files(plan, folder, name, relative_config)
        (folder / "summary.json").write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        (folder / "report.html").write_text(render_report(data), encoding="utf-8")

    progress.stage(f"writing {out}")
    try:
        write_output(out, write)
    except SpecError as error:
        return _fail(error, errors)
    if (warning := namesake_warning(path, stack.spec.name)) is not None:  # once the plan stands: a refusal is one line
        errors.print(warning, markup=False, highlight=False, emoji=False)
    if args.json:
        print(json.dumps(data, indent=2, sort_keys=True))
    elif args.quiet:
        print_violations(console, violations)
    else:
        print_summary(console, data, violations, details=args.details)
        print_warnings(console, data)
        if base_diff is not None:
            print_diff(console, base_diff)
        console.print(f"wrote {out / 'preview.json'}, {out / 'report.html'}, {out / 'summary.json'}, "
                      f"{len(objects)} manifests in {out / 'manifests'} and {len(releases)} Helm releases in "
                      f"{out / 'charts'}", soft_wrap=True)
        progress.stage("done")
    return EXIT_POLICY if any(v.mandatory for v in violations) else EXIT_OK


def cmd_check(args: argparse.Namespace, console: Console, errors: Console) -> int:
    """A saved preview against the pack. The policy config is the file given, or the one of the stack the user
    names; never one the document picks for itself (its `config.stack`, its URNs). Without either, every rule
    runs at its defaults, the strictest."""
    from gpucluster.offline.policy_config import read_policy_config, stack_policy_config
    from gpucluster.offline.policy_runner import run_policies_on_states
    from gpucluster.offline.preview import read_preview
    from gpucluster.offline.preview_steps import preview_stack, shows_sames, steps_from_preview
    from gpucluster.offline.program_check import check_program
    from gpucluster.offline.replaced_domains import replaced_domain_violations
    from gpucluster.report.summary import print_violations
    from gpucluster.simulation.check import plan_checked
    from gpucluster.spec import load_stack_file

    root = project_root()
    acknowledged: list[str] | None = None  # the stack's acknowledgeDeletions.infinibandDomains, when it is named
    try:
        name, path = _named_stack(args.stack, root) if args.stack is not None else (None, None)
        config = read_policy_config(Path(args.policy_config)) if args.policy_config else {}
        document = read_preview(Path(args.preview))
        states = steps_from_preview(document, args.preview)
        preview_stack(document, args.preview, name)
        if name is not None and path is not None:
            if not path.is_file():
                raise SpecError.at("--stack", f"no stack file {path}; name a stack under stacks/ or a stack file's "
                                              "path, or pass --policy-config FILE instead")
            try:
                stack = load_stack_file(path, name)
                config_path = stack_policy_config(stack.config, stack.name, root)
            except SpecError as error:  # the stack file's problems, named by the file they are in
                raise SpecError([Problem(f"{path}: {p.path}", p.message) for p in error.problems]) from None
            config = read_policy_config(config_path) if config_path else {}
            acknowledged = list(stack.spec.acknowledge_deletions.infiniband_domains)
            every = shows_sames(document)
            if problems := check_program(plan_checked(stack.spec), states, every):  # as `plan` and `pulumi up` refuse
                raise SpecError(problems)
            if not every:
                errors.print("note: the preview shows only what changes (no --show-sames): the apply-order check, "
                             "which needs every resource, is skipped", markup=False, highlight=False)
        else:
            errors.print("note: no --stack: " + ("" if args.policy_config else "every rule runs at the pack's defaults "
                         "(the strictest), and ") + "the program's checks are skipped (the ARM preflight and the rest need "
                         "the stack's plan); --stack NAME judges with that stack's policy config and runs them",
                         markup=False, highlight=False)
    except SpecError as error:
        return _fail(error, errors)
    # The pack sees new inputs only; replacements need the preview's old states (policies/rules/replacements.py).
    violations = run_policies_on_states(states, config) + replaced_domain_violations(document, acknowledged)
    print_violations(console, violations)
    return EXIT_POLICY if any(v.mandatory for v in violations) else EXIT_OK


def _named_stack(stack: str, root: Path) -> tuple[str, Path]:
    """`check --stack`: a stack name under stacks/, or a stack file's path (`.yaml`), as `plan` takes them."""
    from gpucluster.spec import resolve_stack_path
    from gpucluster.spec.stack_names import check_stack_name

    if Path(stack).suffix in (".yaml", ".yml"):
        return resolve_stack_path(stack, root / "stacks")
    return check_stack_name(stack, "--stack"), root / "stacks" / f"Pulumi.{stack}.yaml"


def _stack_names() -> list[str]:
    """The stacks under the project's stacks/, as `plan <name>` takes them."""
    return sorted(p.name.removeprefix("Pulumi.").removesuffix(".yaml")
                  for p in (project_root() / "stacks").glob("Pulumi.*.yaml"))


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="gpucluster", description=__doc__)
    sub = top.add_subparsers(dest="command", required=True)
    plan = sub.add_parser("plan", help="run the program offline under mocks; write preview.json and manifests")
    plan.add_argument("stack", help=f"a stack name under stacks/ ({', '.join(_stack_names()) or 'none yet'}) or a path "
                                    "to a stack file")
    plan.add_argument("--out", help="output folder (default out/<stack>)")
    plan.add_argument("--json", action="store_true", help="print the summary as JSON (also written to summary.json)")
    plan.add_argument("--quiet", action="store_true", help="print only errors and policy violations (for CI)")
    plan.add_argument("--details", action="store_true", help="also print the resources by type, node images per scale "
                                                              "set, the node agents' API load, versions and first boot "
                                                              "(always in report.html and summary.json)")
    plan.add_argument("--policy-config", help="JSON policy config (default: the file the stack's gpucluster:policyConfig "
                                              "names, else policies/config/<stack>.json if present)")
    plan.add_argument("--base", help="a base plan folder: show what this plan changes; refuse what Azure would refuse")
    check = sub.add_parser("check", help="run the policy pack over a saved preview.json")
    check.add_argument("preview", help="path to a preview.json")
    judged_by = check.add_mutually_exclusive_group()
    judged_by.add_argument("--stack", help="the stack the preview is of (a name under stacks/ or a stack file's path): "
                                           "its policy config and the program's checks, as plan runs them (default: "
                                           "the pack's defaults, no program checks)")
    judged_by.add_argument("--policy-config", help="JSON policy config, as for `pulumi preview --policy-pack-config`")
    sub.add_parser("backend-url", help="print the Pulumi backend URL a `pulumi login` elsewhere must name to reach this "
                                        "machine's state (step 2 of a first `pulumi up` sends it to the runner)")
    add_diff_parser(sub)
    add_verify_parser(sub)
    return top


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    console = Console() if sys.stdout.isatty() else Console(width=160)
    errors = Console(stderr=True, soft_wrap=True)  # one problem per line, never wrapped
    if args.command == "backend-url":
        from gpucluster.offline.backend_url import main as backend_url_main

        return backend_url_main()
    handler = {"plan": cmd_plan, "check": cmd_check, "diff": cmd_diff, "verify": cmd_verify}[args.command]
    if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
        # A SIGINT ignored on entry stays ignored: a shell without job control starts background jobs that way so
        # that Ctrl-C at the terminal stops only the foreground (POSIX, Shell Command Language 2.11).
        signal.signal(signal.SIGINT, _interrupted)
    if args.command == "plan":
        from gpucluster.offline.gc_budget import fewer_collections

        with fewer_collections():  # a third of a plan's CPU was full collections (components/offline/gc_budget.py)
            return handler(args, console, errors)
    return handler(args, console, errors)


def _interrupted(signum: int, frame: object) -> None:
    """Ctrl-C: leave at once, quietly. A KeyboardInterrupt can be swallowed inside the engine's event loop, and
    there is nothing to undo: the output folder is swapped in one rename, the kernel drops the locks, and the
    next run removes a half-written version."""
    os.write(2, b"interrupted: the output folder is as it was, or this run's complete output\n")
    os._exit(EXIT_INTERRUPTED)


if __name__ == "__main__":
    sys.exit(main())
