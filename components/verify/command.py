"""`gpucluster verify <stack>`: the stack's plan against the live subscription and cluster, read-only.

Imported by the command line for its parser; the Azure SDKs and the Kubernetes client load only when verify runs.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from rich.console import Console

from components.errors import Problem, SpecError

if TYPE_CHECKING:
    from components.planning.cluster_plan import ClusterPlan
    from components.verify.connect import AzureAccess
    from components.verify.results import Result

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2


def add_parser(sub: Any) -> None:
    verify = sub.add_parser("verify", help="check the plan's assumptions on the live subscription and cluster "
                                           "(read-only)")
    verify.add_argument("stack", help="a stack name under stacks/ or a path to a stack file")
    verify.add_argument("--kubeconfig", help="the cluster's kubeconfig (default $KUBECONFIG, then ~/.kube/config)")
    verify.add_argument("--context", help="the kubeconfig context (default its current-context)")
    verify.add_argument("--subscription", help="the Azure subscription id (default $AZURE_SUBSCRIPTION_ID)")
    verify.add_argument("--arm-endpoint", help="ARM's endpoint for a sovereign cloud (default "
                                               "https://management.azure.com)")
    verify.add_argument("--feature", action="append", default=[], metavar="NAMESPACE/NAME",
                        help="a preview feature the subscription must have registered (repeatable)")
    verify.add_argument("--expiry-days", type=int, default=30,
                        help="fail a token or certificate that expires within this many days (default 30)")
    verify.add_argument("--json", action="store_true", help="print the verdicts as JSON (for CI)")
    verify.add_argument("--nccl", action="store_true",
                        help="also run a two-node NCCL all-reduce in one InfiniBand domain as a Job: this CREATES "
                             "objects in the cluster (and deletes them after)")


@dataclass(frozen=True)
class Options:
    features: list[str]
    window: timedelta
    now: datetime


def _unreachable() -> tuple[type[Exception], ...]:
    """What a service that does not answer, or refuses the credentials, raises."""
    from azure.core.exceptions import AzureError
    from urllib3.exceptions import HTTPError

    from components.verify.kube import KubeError

    return AzureError, KubeError, HTTPError, OSError


def run_checks(plan: ClusterPlan, azure: AzureAccess, api_client: Any, options: Options) -> list[Result]:
    """Every read-only check, in order; one check's failure to read does not stop the others."""
    from components.verify import check_addons, check_capacity, check_expiry, check_images, check_nics, check_nodes
    from components.verify import check_registrations as registrations
    from components.verify.arm import Arm
    from components.verify.check_registry import check_registry
    from components.verify.check_rollout import check_instance_models, check_progress
    from components.verify.check_scale_sets import check_scale_sets
    from components.verify.kube import Kube
    from components.verify.readonly import WriteRefusedError
    from components.verify.results import guarded

    arm, kube = Arm(azure, plan), Kube(api_client)
    checks: list[tuple[str, Callable[[], list[Result]]]] = [
        ("azure.providers", lambda: registrations.check_providers(arm, plan)),
        ("azure.features", lambda: registrations.check_features(arm, plan, options.features)),
        ("azure.sizes", lambda: check_capacity.check_sizes(arm, plan)),
        ("azure.quota", lambda: check_capacity.check_quota(arm, plan)),
        ("azure.scale-sets", lambda: check_scale_sets(arm, plan)),
        ("azure.nics", lambda: check_nics.check_nics(arm, plan)),
        ("azure.images", lambda: check_images.check_images(arm, plan)),
        ("azure.registry", lambda: check_registry(arm, plan)),
        ("azure.instance-models", lambda: check_instance_models(arm, plan)),
        ("cluster.nodes", lambda: check_nodes.check_nodes(kube, plan)),
        ("cluster.dns", lambda: check_addons.check_dns(kube, plan)),
        ("cluster.cni", lambda: check_addons.check_cni(kube, plan)),
        ("cluster.images", lambda: check_addons.check_images(kube, plan)),
        ("cluster.bootstrap-token", lambda: check_expiry.check_tokens(kube, options.now, options.window)),
        ("cluster.certificates", lambda: check_expiry.check_certificates(kube, options.now, options.window)),
        ("cluster.rollout", lambda: check_progress(kube, plan)),
    ]
    return [result for name, check in checks for result in guarded(name, check, WriteRefusedError, _unreachable())]


def _plan(stack: str) -> tuple[str, ClusterPlan]:
    from components.project import project_root
    from components.simulation.check import plan_checked
    from components.spec import load_stack_file, resolve_stack_path

    name, path = resolve_stack_path(stack, project_root() / "stacks")
    return name, plan_checked(load_stack_file(path, name).spec)


def _default_azure(subscription: str | None, endpoint: str | None) -> AzureAccess:
    from components.verify.connect import azure_access

    return azure_access(subscription, endpoint)


def verify_command(args: argparse.Namespace, console: Console, errors: Console,
                   azure_factory: Callable[[str | None, str | None], AzureAccess] = _default_azure) -> int:
    from components.verify import report
    from components.verify.check_registrations import FEATURE_NAME
    from components.verify.connect import kube_api_client, kubeconfig_path
    from components.verify.readonly import WriteRefusedError
    from components.verify.results import failures, guarded

    try:
        bad = [Problem("--feature", f"{f!r}: give it as Microsoft.<Namespace>/<FeatureName>")
               for f in args.feature if not FEATURE_NAME.match(f)]
        if args.expiry_days < 0:
            bad.append(Problem("--expiry-days", f"must be >= 0 (got {args.expiry_days})"))
        if bad:
            raise SpecError(bad)
        name, plan = _plan(args.stack)
        api_client = kube_api_client(kubeconfig_path(args.kubeconfig), args.context)
        azure = azure_factory(args.subscription, args.arm_endpoint)
    except SpecError as error:
        for problem in error.problems:
            errors.print(f"error: {problem}", markup=False, highlight=False)
        return EXIT_BAD_INPUT
    options = Options(args.feature, timedelta(days=args.expiry_days), datetime.now(UTC))
    results = run_checks(plan, azure, api_client, options)
    if args.nccl:
        from components.verify.nccl import NcclError, run_nccl

        config = kubeconfig_path(args.kubeconfig)
        results += guarded("cluster.nccl", lambda: run_nccl(plan, config, args.context, api_client),
                           WriteRefusedError, (*_unreachable(), NcclError))
    cluster = str(api_client.configuration.host)
    if args.json:
        report.print_json(console, name, azure.subscription, cluster, results)
    else:
        report.print_results(console, name, azure.subscription, cluster, results)
    return EXIT_FAILED if failures(results) else EXIT_OK


def cmd_verify(args: argparse.Namespace, console: Console, errors: Console) -> int:
    return verify_command(args, console, errors)
