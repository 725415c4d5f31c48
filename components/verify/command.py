"""`gpucluster verify <stack>`: the stack's plan against the live subscription and cluster, read-only.

Imported by the command line for its parser; the Azure SDKs and the Kubernetes client load only when verify runs.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from rich.console import Console

from gpucluster.errors import Problem, SpecError
from gpucluster.verify.bounds import LIMITS, Limits
from gpucluster.verify.results import Check
from gpucluster.vocabulary import LABEL_NCCL_RUN

if TYPE_CHECKING:
    from gpucluster.planning.cluster_plan import ClusterPlan
    from gpucluster.simulation.check import CheckedPlan
    from gpucluster.verify.connect import AzureAccess
    from gpucluster.verify.results import Result

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
    verify.add_argument("--cluster-only", action="store_true",
                        help="only the cluster's checks, from the kubeconfig alone: no Azure credentials, subscription "
                             "or ARM read")
    verify.add_argument("--azure-only", action="store_true",
                        help="only what the subscription must offer before the first `pulumi up`: resource providers, "
                             "preview features, sizes per zone and quota; no kubeconfig, nothing deployed read")
    verify.add_argument("--nccl", action="store_true",
                        help="also run a two-node NCCL all-reduce in one InfiniBand domain as a Job: this CREATES "
                             "objects in the cluster (and deletes them after)")


@dataclass(frozen=True)
class Options:
    features: list[str]
    window: timedelta
    now: datetime
    limits: Limits = LIMITS


def _unreachable() -> tuple[type[Exception], ...]:
    """What a service that does not answer, or refuses the credentials, raises."""
    from azure.core.exceptions import AzureError
    from urllib3.exceptions import HTTPError

    from gpucluster.verify.kube import KubeError

    return AzureError, KubeError, HTTPError, OSError


PRE_DEPLOY = ("azure.providers", "azure.features", "azure.sizes", "azure.quota", "azure.existing-network")
"""The checks that read only the subscription, not what a `pulumi up` made: `--azure-only` runs these."""
API_PROBE_SECONDS = 10.0
"""How long verify waits for the API server's /version before it says the cluster is not reachable from here."""
UNREACHABLE = Check("cluster.reachable", "components/verify/command.py (GET /version before the cluster's checks)")


def run_checks(plan: ClusterPlan, azure: AzureAccess | None, api_client: Any, options: Options,
               azure_only: bool = False, reachable: str = "") -> list[Result]:
    """Every read-only check, in order (the Azure ones only with `azure`; with `azure_only` the pre-deploy ones alone);
    one check's failure to read does not stop the others. `reachable`: why the API server did not answer, when it
    did not; the cluster's checks are then one failure, not one timeout each."""
    from gpucluster.verify import (
        check_addons,
        check_capacity,
        check_expiry,
        check_images,
        check_network,
        check_nics,
        check_nodes,
    )
    from gpucluster.verify import check_registrations as registrations
    from gpucluster.verify.arm import Arm
    from gpucluster.verify.check_racks import check_racks, check_subgroups
    from gpucluster.verify.check_registry import check_registry
    from gpucluster.verify.check_rollout import check_instance_models, check_progress
    from gpucluster.verify.check_scale_sets import check_scale_sets
    from gpucluster.verify.kube import Kube
    from gpucluster.verify.readonly import WriteRefusedError
    from gpucluster.verify.results import guarded

    kube = Kube(api_client)
    checks: list[tuple[str, Callable[[], list[Result]]]] = []
    if azure is not None:
        arm = Arm(azure, plan)
        checks += [
            ("azure.providers", lambda: registrations.check_providers(arm, plan)),
            ("azure.features", lambda: registrations.check_features(arm, plan, options.features)),
            ("azure.sizes", lambda: check_capacity.check_sizes(arm, plan)),
            ("azure.quota", lambda: check_capacity.check_quota(arm, plan)),
            ("azure.existing-network", lambda: check_network.check_existing_network(arm, plan)),
            ("azure.subnets", lambda: check_network.check_created_subnets(arm, plan)),
            ("azure.scale-sets", lambda: check_scale_sets(arm, plan)),
            ("azure.nics", lambda: check_nics.check_nics(arm, plan)),
            ("azure.images", lambda: check_images.check_images(arm, plan)),
            ("azure.registry", lambda: check_registry(arm, plan)),
            ("azure.subgroups", lambda: check_subgroups(arm, plan)),
            ("azure.instance-models", lambda: check_instance_models(arm, plan)),
        ]
    if azure_only:
        checks = [(name, check) for name, check in checks if name in PRE_DEPLOY]
        return bounded(checks, options.limits,
                       lambda name, check: guarded(name, check, WriteRefusedError, _unreachable()))
    if reachable:
        return [*bounded(checks, options.limits,
                         lambda name, check: guarded(name, check, WriteRefusedError, _unreachable())),
                UNREACHABLE.failed(str(api_client.configuration.host), f"not reachable from here: {reachable}",
                                   "run verify where the API servers' load balancer answers: on the deployment runner "
                                   "(docs/operations.md, 'Verifying from the runner'), or through "
                                   "inCluster.apiAccess; the cluster's checks were not run")]
    checks += [
        ("cluster.nodes", lambda: check_nodes.check_nodes(kube, plan)),
        ("cluster.racks", lambda: check_racks(kube, plan)),
        ("cluster.dns", lambda: check_addons.check_dns(kube, plan)),
        ("cluster.cni", lambda: check_addons.check_cni(kube, plan)),
        ("cluster.images", lambda: check_addons.check_images(kube, plan)),
        ("cluster.bootstrap-token", lambda: check_expiry.check_tokens(kube, options.now, options.window)),
        ("cluster.certificates", lambda: check_expiry.check_certificates(kube, options.now, options.window)),
        ("cluster.rollout", lambda: check_progress(kube, plan)),
    ]
    return bounded(checks, options.limits, lambda name, check: guarded(name, check, WriteRefusedError, _unreachable()))


def api_answers(api_client: Any, seconds: float) -> str:
    """"" when the API server answers GET /version within `seconds` (any HTTP answer: the checks report what they
    read); else why not, in one line."""
    from kubernetes.client import VersionApi
    from kubernetes.client.exceptions import ApiException

    try:
        VersionApi(api_client).get_code(_request_timeout=seconds)
    except ApiException as error:
        if error.status:
            return ""
        return f"{api_client.configuration.host} did not answer GET /version within {seconds:g} s ({error.reason})"
    except _unreachable() as error:
        return f"{api_client.configuration.host} did not answer GET /version within {seconds:g} s " \
               f"({type(error).__name__})"
    return ""


def bounded(checks: list[tuple[str, Callable[[], list[Result]]]], limits: Limits,
            guard: Callable[[str, Callable[[], list[Result]]], list[Result]]) -> list[Result]:
    """Each check in a thread of its own, given up after the time per check or what is left of the total: a check a
    server holds open fails naming the bound, the next one runs; once the total is spent the rest fail unrun."""
    from gpucluster.verify.bounds import BoundError, within
    from gpucluster.verify.results import bound_failure

    started = time.monotonic()
    results: list[Result] = []
    for name, check in checks:
        left = limits.total_seconds - (time.monotonic() - started)
        if left <= 0:
            results.append(bound_failure(name, BoundError("total time", f"not run: verify's {limits.total_seconds:g} s "
                                                                       "were spent before it")))
            continue
        bound = "time per check" if limits.check_seconds <= left else "total time"
        try:
            results += within(min(limits.check_seconds, left), lambda n=name, c=check: guard(n, c), bound, limits)
        except BoundError as error:
            results.append(bound_failure(name, error))
    return results


def _plan(stack: str, subscription: str | None, needs_azure: bool) -> tuple[str, CheckedPlan, str | None]:
    """The stack's plan and the subscription to read: `--subscription`, else the stack's
    `azure-native:subscriptionId`, else AZURE_SUBSCRIPTION_ID (None: azure_access says so). SpecError when Azure is
    to be read and none of them names one."""
    from gpucluster.project import project_root
    from gpucluster.simulation.check import plan_checked
    from gpucluster.spec import load_stack_file, resolve_stack_path
    from gpucluster.spec.loader import read_stack_config
    from gpucluster.spec.registry_name import SUBSCRIPTION_CONFIG, SUBSCRIPTION_ENV
    from gpucluster.verify.connect import NO_SUBSCRIPTION

    name, path = resolve_stack_path(stack, project_root() / "stacks")
    subscription = subscription or read_stack_config(path).get(SUBSCRIPTION_CONFIG) or None
    if needs_azure and not (subscription or os.environ.get(SUBSCRIPTION_ENV)):
        raise SpecError.at("--subscription", NO_SUBSCRIPTION)
    return name, plan_checked(load_stack_file(path, name, subscription or "").spec), subscription


def _default_azure(subscription: str | None, endpoint: str | None) -> AzureAccess:
    from gpucluster.verify.connect import azure_access

    return azure_access(subscription, endpoint)


INTERRUPTED = ("interrupted: verify stopped before its verdicts; it had written nothing, and the kubeconfig's key "
               "files it wrote are removed")
INTERRUPTED_NCCL = ("interrupted: verify stopped before its verdicts; the kubeconfig's key files it wrote are removed; "
                    "the NCCL run's Job and Service were deleted on the way out if it had created them (`kubectl -n "
                    f"gpucluster-health get jobs,services -l {LABEL_NCCL_RUN}` lists any left)")
EXIT_INTERRUPTED = 130


def _raise_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _interrupts_unwind() -> Callable[[], None]:
    """Ctrl-C and SIGTERM raise KeyboardInterrupt while verify runs, so every `finally` runs (the NCCL run's deletes,
    the key files' removal) instead of the command line's immediate exit; returns what restores the handlers."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    wanted = [s for s in (signal.SIGINT, signal.SIGTERM) if signal.getsignal(s) is not signal.SIG_IGN]
    previous = {s: signal.signal(s, _raise_interrupt) for s in wanted}

    def restore() -> None:
        for s, handler in previous.items():
            signal.signal(s, handler)

    return restore


def verify_command(args: argparse.Namespace, console: Console, errors: Console,
                   azure_factory: Callable[[str | None, str | None], AzureAccess] = _default_azure) -> int:
    from gpucluster.verify.connect import remove_key_files

    restore = _interrupts_unwind()
    try:
        return _verify(args, console, errors, azure_factory)
    except KeyboardInterrupt:
        errors.print(INTERRUPTED_NCCL if args.nccl else INTERRUPTED, markup=False, highlight=False)
        return EXIT_INTERRUPTED
    finally:
        remove_key_files()
        restore()


def _verify(args: argparse.Namespace, console: Console, errors: Console,
            azure_factory: Callable[[str | None, str | None], AzureAccess]) -> int:
    from gpucluster.verify import report
    from gpucluster.verify.check_registrations import FEATURE_NAME
    from gpucluster.verify.connect import kube_api_client, kubeconfig_path
    from gpucluster.verify.readonly import WriteRefusedError
    from gpucluster.verify.results import failures, guarded, redacted

    try:
        bad = [Problem("--feature", f"{f!r}: give it as Microsoft.<Namespace>/<FeatureName>")
               for f in args.feature if not FEATURE_NAME.match(f)]
        if args.expiry_days < 0:
            bad.append(Problem("--expiry-days", f"must be >= 0 (got {args.expiry_days})"))
        if args.cluster_only:
            bad += [Problem(flag, "reads Azure: drop it, or drop --cluster-only") for flag, given in (
                ("--subscription", args.subscription), ("--arm-endpoint", args.arm_endpoint),
                ("--feature", args.feature)) if given]
        if args.azure_only:
            bad += [Problem(flag, "reads the cluster: drop it, or drop --azure-only") for flag, given in (
                ("--cluster-only", args.cluster_only), ("--kubeconfig", args.kubeconfig), ("--context", args.context),
                ("--nccl", args.nccl)) if given]
        if bad:
            raise SpecError(bad)
        name, plan, subscription = _plan(args.stack, args.subscription, needs_azure=not args.cluster_only)
        api_client = None if args.azure_only else kube_api_client(kubeconfig_path(args.kubeconfig), args.context)
        azure = None if args.cluster_only else azure_factory(subscription, args.arm_endpoint)
    except SpecError as error:
        for problem in error.problems:
            errors.print(f"error: {problem}", markup=False, highlight=False)
        return EXIT_BAD_INPUT
    from gpucluster.verify import bounds

    options = Options(args.feature, timedelta(days=args.expiry_days), datetime.now(UTC), bounds.LIMITS)
    reachable = "" if api_client is None else api_answers(api_client, API_PROBE_SECONDS)
    results = run_checks(plan, azure, api_client, options, azure_only=args.azure_only, reachable=reachable)
    if args.nccl:
        from gpucluster.verify.nccl import NcclError, run_nccl

        config = kubeconfig_path(args.kubeconfig)
        results += guarded("cluster.nccl", lambda: run_nccl(plan, config, args.context, api_client),
                           WriteRefusedError, (*_unreachable(), NcclError))
    results = redacted(results, _sent_secrets(azure, api_client))
    cluster = str(api_client.configuration.host) if api_client is not None else "not read (--azure-only)"
    subscription = azure.subscription if azure is not None else "not read (--cluster-only)"
    if args.json:
        report.print_json(console, name, subscription, cluster, results)
    else:
        report.print_results(console, name, subscription, cluster, results)
    return EXIT_FAILED if failures(results) else EXIT_OK


def _sent_secrets(azure: AzureAccess | None, api_client: Any) -> list[str]:
    """The bearer tokens the run sent: the kubeconfig's (or its exec plugin's) and ARM's, as the clients hold them."""
    found: list[str] = []
    if api_client is not None:
        for value in (getattr(api_client.configuration, "api_key", None) or {}).values():
            found += [str(value), str(value).removeprefix("Bearer ").strip()]
    if azure is not None:
        with contextlib.suppress(Exception):  # no token to hide is no token to leak
            found.append(azure.credential.get_token(azure.scope).token)  # the cached token the checks sent
    return found


def cmd_verify(args: argparse.Namespace, console: Console, errors: Console) -> int:
    return verify_command(args, console, errors)
