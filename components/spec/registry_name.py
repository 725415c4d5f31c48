"""The registry's name when the stack gives none: the cluster's name and a hash of the subscription.

Registry names are global across Azure (the login server `<name>.azurecr.io`), and the name must be known when the
plan renders manifests and boot documents offline, so it cannot wait for the provider's answer. A hash of the
cluster, group and region alone is the same for every user of a shipped stack: the second one anywhere would fail.
So the name hashes the subscription the stack deploys to, read where both `gpucluster plan` and the program under
the engine see it: the stack's `azure-native:subscriptionId` (the provider's own key, so the provider deploys to the
same one), else AZURE_SUBSCRIPTION_ID. Under the real engine the program checks that the provider deploys to that
subscription (__main__.py), so a name never changes between `up`s of one stack.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

from gpucluster.errors import Problem, SpecError
from gpucluster.spec.cluster import ClusterSpec
from gpucluster.spec.resource_names import container_registry_name

SUBSCRIPTION_CONFIG = "azure-native:subscriptionId"
SUBSCRIPTION_ENV = "AZURE_SUBSCRIPTION_ID"
SUBSCRIPTION_ID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
SET_IT = (f"`pulumi config set {SUBSCRIPTION_CONFIG} $(az account show --query id -o tsv) --stack <stack>` "
          f"(or export {SUBSCRIPTION_ENV}), or name the registry in cluster.registry.name")


def naming_subscription(config: Mapping[str, Any], environ: Mapping[str, str] | None = None) -> tuple[str, str]:
    """(subscription id, where it was read) for the registry's name: the stack config first, then the environment;
    ("", "") when neither has one. A value that is not a subscription id is a SpecError naming its key."""
    environ = os.environ if environ is None else environ
    for where, value in ((SUBSCRIPTION_CONFIG, config.get(SUBSCRIPTION_CONFIG)),
                         (SUBSCRIPTION_ENV, environ.get(SUBSCRIPTION_ENV))):
        if value in (None, ""):
            continue
        if not isinstance(value, str) or not SUBSCRIPTION_ID.match(value):
            raise SpecError.at(where, f"{value!r} is not a subscription id (a GUID, `az account show --query id "
                                      "-o tsv`)")
        return value.lower(), where
    return "", ""


def with_registry_name(spec: ClusterSpec, subscription: str) -> ClusterSpec:
    """`spec` with `registry.name` set: the stack's own name if it gives one, else `<cluster>acr<hash>` of the
    subscription. SpecError when there is neither, with the fix."""
    if spec.registry.name:
        return spec
    if not subscription:
        raise SpecError([Problem(
            "cluster.registry.name", "not set, and no subscription to make it unique from (registry names are "
            f"global across Azure, so the default hashes the subscription the stack deploys to): set it with {SET_IT}",
            fix=SET_IT)])
    name = container_registry_name(spec.name, spec.location, subscription)
    return spec.model_copy(update={"registry": spec.registry.model_copy(update={"name": name})})
