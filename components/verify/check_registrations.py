"""Resource-provider and preview-feature registrations of the subscription."""

from __future__ import annotations

import re

from gpucluster.planning.cluster_plan import ClusterPlan
from gpucluster.verify import expected
from gpucluster.verify.arm import Arm, not_found
from gpucluster.verify.results import Check, Result

PROVIDERS = Check("azure.providers", "components/verify/expected.py PROVIDERS: the namespaces of the resource types "
                  "components/azure/ declares")
FEATURES = Check("azure.features", "the stack (cluster.network.prefixOnNicOnboarding) and --feature")
PREFIX_ON_NIC_SOURCE = ("MicrosoftDocs/azure-docs articles/virtual-network/ip-services/"
                        "virtual-network-private-ip-address-blocks-portal.md (2024-11-05): the preview is enabled by "
                        "Microsoft after an onboarding form; no feature name is published")
FEATURE_NAME = re.compile(r"^(?P<namespace>Microsoft\.[A-Za-z]+)/(?P<name>[A-Za-z0-9][A-Za-z0-9_.-]*)$")


def check_providers(arm: Arm, plan: ClusterPlan) -> list[Result]:
    results = []
    for namespace in expected.providers(plan):
        try:
            state = arm.resources.providers.get(namespace).registration_state or "unknown"
        except not_found():
            state = "NotFound"
        if state == "Registered":
            results.append(PROVIDERS.passed(namespace, "Registered"))
        else:
            results.append(PROVIDERS.failed(namespace, f"registration state {state}",
                                            f"az provider register --namespace {namespace} --wait"))
    return results


def wanted_features(plan: ClusterPlan, given: list[str]) -> tuple[list[tuple[str, str, str]], list[Result]]:
    """(namespace, feature, where the name came from) for each feature to read, and the verdicts settled without a
    read: a prefix-mode stack that records no onboarding fails, one that records it in words cannot be read."""
    wanted = []
    settled: list[Result] = []
    for text in given:
        match = FEATURE_NAME.match(text)
        if match is None:  # the command line refuses these before any check runs
            raise ValueError(f"--feature {text!r} is not Microsoft.<Namespace>/<FeatureName>")
        wanted.append((match["namespace"], match["name"], "--feature"))
    if plan.prefix_mode:
        record = plan.spec.network.prefix_on_nic_onboarding
        match = FEATURE_NAME.match(record or "")
        if match is not None:
            wanted.append((match["namespace"], match["name"], "cluster.network.prefixOnNicOnboarding"))
        elif record is None:
            settled.append(FEATURES.failed(
                "Prefix on NIC", "the stack's pools take /28 blocks (podAddresses: prefixes) and the stack records no "
                "onboarding of the subscription (cluster.network.prefixOnNicOnboarding)",
                "have Microsoft onboard the subscription (the form in the source), then record the reference or the "
                "feature name Microsoft gives (Microsoft.Network/<name>) as cluster.network.prefixOnNicOnboarding",
                PREFIX_ON_NIC_SOURCE))
        else:
            settled.append(FEATURES.skipped(
                "Prefix on NIC", f"recorded as {record!r}, not a feature name (Namespace/Name), so there is nothing to "
                "read; the azure.nics check reads the blocks on the live NICs instead. Record the name as "
                "Microsoft.Network/<name>, or pass --feature, to have it read here", PREFIX_ON_NIC_SOURCE))
    return wanted, settled


def check_features(arm: Arm, plan: ClusterPlan, given: list[str]) -> list[Result]:
    wanted, results = wanted_features(plan, given)
    for namespace, name, origin in wanted:
        subject = f"{namespace}/{name}"
        try:
            properties = arm.features.features.get(namespace, name).properties
            state = (properties.state if properties is not None else None) or "unknown"
        except not_found():
            state = "NotFound"
        source = f"feature name from {origin}"
        if state == "Registered":
            results.append(FEATURES.passed(subject, "Registered", source))
        else:
            results.append(FEATURES.failed(
                subject, f"state {state}",
                f"az feature register --namespace {namespace} --name {name}, wait for Registered "
                f"(az feature show), then az provider register --namespace {namespace}", source))
    return results
