"""One set of refusals for `gpucluster plan`, `gpucluster check --stack` and `pulumi up` (`check_program`): what Azure
would refuse in the program's resources (the ARM preflight), a first boot that cannot come up in the order the program
applies it, a file a boot document names that its image lacks, a boot document over Azure's customData cap, and what
the stack's Kubernetes minor no longer serves.

These checks read what the program declares, so `gpucluster plan` runs them on its own run under mocks
(components/offline/engine.py) and `check --stack` on the saved preview's new states. A real `pulumi up` or `pulumi
preview` cannot run the program under mocks in its own process (the engine's runtime settings are the real ones), so
`__main__.py` runs this module in a child process on the same stack config before it declares anything: a refusal
stops the engine with the plan's message. The child knows it is the check (`CHECK_ENV`) and does not check again."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpucluster.errors import Problem, SpecError
from gpucluster.planning.cluster_plan import ClusterPlan

CHECK_ENV = "GPUCLUSTER_PROGRAM_CHECK"
"""Set in the child that runs the check, so the program it runs under mocks does not start another."""
PROGRAM = Path(__file__).resolve().parents[2] / "__main__.py"


@dataclass(frozen=True)
class Phase:
    """One kind of refusal: its name, as `gpucluster plan` reports progress, and the check over the plan and the
    states the program declares (a preview's `newState`s)."""

    name: str
    check: Callable[[ClusterPlan, list[dict[str, Any]]], list[Problem]]
    needs_every_resource: bool = False
    """Reads what the program does not change too: skipped over a preview that shows only the changes."""


def _preflight(plan: ClusterPlan, states: list[dict[str, Any]]) -> list[Problem]:
    from gpucluster.preflight import problems, run_preflight

    checked = run_preflight([{"newState": state} for state in states], plan)
    return list(problems(checked.errors)) if checked.errors else []


def _apply_order(plan: ClusterPlan, states: list[dict[str, Any]]) -> list[Problem]:
    from gpucluster.simulation.check import check_order

    try:
        check_order(plan, states)
    except SpecError as error:
        return list(error.problems)
    return []


def _image_files(plan: ClusterPlan, states: list[dict[str, Any]]) -> list[Problem]:
    from gpucluster.offline.boot_docs import boot_documents, missing_image_files

    return list(missing_image_files(plan, boot_documents(plan)))


def _custom_data(plan: ClusterPlan, states: list[dict[str, Any]]) -> list[Problem]:
    from gpucluster.offline.custom_data_size import custom_data_problems, custom_data_sizes

    return custom_data_problems(custom_data_sizes(plan))


def _removed_apis(plan: ClusterPlan, states: list[dict[str, Any]]) -> list[Problem]:
    from gpucluster.offline.boot_docs import boot_documents
    from gpucluster.offline.manifests import helm_releases, kubernetes_objects
    from gpucluster.offline.preview_steps import declared
    from gpucluster.offline.removals import find_uses, removal_problems

    resources = declared(states)
    uses = find_uses(kubernetes_objects(resources), helm_releases(resources), boot_documents(plan))
    return list(removal_problems(uses, plan.versions.kubernetes_version))


PHASES = (
    Phase("what Azure would refuse (the ARM preflight)", _preflight),
    Phase("the in-cluster layer in the order the program applies it", _apply_order, needs_every_resource=True),
    Phase("files the boot documents name, in their images", _image_files),
    Phase("boot documents against Azure's customData cap", _custom_data),
    Phase("APIs the stack's Kubernetes minor no longer serves", _removed_apis),
)
"""In the order they run, as kubeadm's preflight runs its checks: the first phase that refuses stops the rest,
so a stack is refused for its most basic fault."""


def check_program(plan: ClusterPlan, states: list[dict[str, Any]], every_resource: bool = True) -> list[Problem]:
    """Every refusal of the program's declared resources (`states`: the `newState`s of its preview), phase by phase
    (`PHASES`), the first phase that refuses reported. `gpucluster plan`, `gpucluster check --stack` and the
    program under a real engine all call this, so they refuse the same stacks with the same lines.
    `every_resource` false (a real preview without `--show-sames`): the phases that need every resource are skipped."""
    for phase in PHASES:
        if phase.needs_every_resource and not every_resource:
            continue
        if problems := phase.check(plan, states):
            return problems
    return []


def new_states(document: dict[str, Any]) -> list[dict[str, Any]]:
    """The `newState` of each step of a preview `gpucluster plan` writes (every step a create)."""
    return [step["newState"] for step in document["steps"]]


def under_real_engine() -> bool:
    """Whether the program runs under a real `pulumi up`/`preview`: not in the check's child, and not under mocks
    (gpucluster plan's engine, a test's `pulumi.runtime.set_mocks`), where the checks run on the run itself."""
    import pulumi
    from pulumi.runtime.mocks import MockMonitor

    return os.environ.get(CHECK_ENV) != "1" and not isinstance(pulumi.runtime.settings.get_monitor(), MockMonitor)


def require_cli(version: str) -> None:
    """The engine running the program is at least `version` (the release whose SDK the lock pins and the deployment
    runner installs): the engine itself judges the range (pulumi SDK `runtime.settings.require_pulumi_version`, the
    engine's RequirePulumiVersion call). SpecError with the fix otherwise."""
    import pulumi

    try:
        pulumi.runtime.settings.require_pulumi_version(f">={version}")
    except Exception as error:  # the engine's refusal, or an engine too old to know the call
        raise SpecError([Problem("pulumi", f"this project runs with the Pulumi CLI v{version} or newer (the release of "
                                           f"the SDK in constraints/runtime.txt, which the deployment runner installs): "
                                           f"{error}")]) from None


def require_subscription(named: str, where: str) -> None:
    """The subscription azure-native deploys to (its getClientConfig) is the one the registry's name was hashed from
    (components/spec/registry_name.py): otherwise a later `up` from elsewhere would rename, and so replace, the
    registry. SpecError with the fix; nothing to check when the stack names its registry itself (`named` empty)."""
    if not named:
        return
    from pulumi_azure_native import authorization

    actual = str(authorization.get_client_config().subscription_id or "").lower()
    if actual != named:
        fix = (f"pulumi config set azure-native:subscriptionId {actual or '<id>'}, or unset {where} if the stack "
               "should go there")
        raise SpecError([Problem(where, f"the registry's name is made from subscription {named} ({where}), but "
                                        f"azure-native deploys to {actual or 'no subscription'}: {fix}", fix=fix)])


def engine_config(project: str) -> dict[str, Any]:
    """The stack config the engine gave the program (the language host's PULUMI_CONFIG), else the cluster alone."""
    import pulumi
    from pulumi.runtime.config import get_config_env

    found = get_config_env()
    if f"{project}:cluster" not in found:
        found = {**found, f"{project}:cluster": json.dumps(pulumi.Config(project).require_object("cluster"))}
    return found


def check_in_child(project: str, stack: str, config: dict[str, Any]) -> None:
    """Runs the program under mocks in a child process with this stack config; SpecError with its problems."""
    try:
        done = subprocess.run([sys.executable, "-m", "gpucluster.offline.program_check", project, stack],
                              input=json.dumps(config), capture_output=True, text=True,
                              env={**os.environ, CHECK_ENV: "1"}, cwd=PROGRAM.parent, check=False)
    except OSError as error:
        raise SpecError([Problem("program", f"the program check could not start: {error}")]) from None
    if done.returncode == 0:
        return
    try:
        found = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    except ValueError:
        found = []
    if done.returncode != 2 or not found:
        raise SpecError([Problem("program", f"the program check ended with exit {done.returncode}: "
                                            f"{(done.stderr or done.stdout).strip()[-2000:]}")])
    raise SpecError([Problem(str(f.get("path")), str(f.get("message")), source=str(f.get("source") or ""),
                             fix=str(f.get("fix") or "")) for f in found])


def main(argv: list[str]) -> int:
    """`python -m components.offline.program_check <project> <stack>` with the stack config (a JSON object, the
    engine's PULUMI_CONFIG) on stdin: each problem as a JSON line on stdout and exit 2, or exit 0."""
    from gpucluster.offline.engine import run_program
    from gpucluster.offline.preview import preview_document
    from gpucluster.simulation.check import plan_checked
    from gpucluster.spec.loader import named_cluster

    project, stack = argv[1], argv[2]
    config = json.loads(sys.stdin.read() or "{}")
    raw = config.get(f"{project}:cluster")
    try:
        plan = plan_checked(named_cluster(json.loads(raw) if isinstance(raw, str) else raw, config))
    except SpecError as error:
        problems = list(error.problems)
    else:
        run = run_program(PROGRAM, project, stack, config)
        problems = check_program(plan, new_states(preview_document(run)))
    for problem in problems:
        print(json.dumps({"path": problem.path, "message": problem.message, "source": problem.source,
                          "fix": problem.fix}))
    return 2 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
