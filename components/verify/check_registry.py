"""The cluster's registry answers with the cache rules the plan serves every image through.

Every image reference the library renders names `<login server>/<prefix>/...` (components/planning/registry.py);
a prefix without its rule, a rule that did not provision, or a credential set ACR cannot use (Docker Hub) is an
image that never pulls. What pulled is read from the pods (components/verify/check_addons.py, image pulls).
"""

from __future__ import annotations

from typing import Any

from gpucluster.planning.cluster_plan import ClusterPlan
from gpucluster.planning.registry import DOCKER_HUB_CREDENTIALS
from gpucluster.verify.arm import Arm, not_found
from gpucluster.verify.results import Check, Result

REGISTRY = Check("azure.registry", "components/planning/registry.py (the plan's registry and cache rules), "
                                   "components/azure/registry.py; MicrosoftDocs/azure-management-docs "
                                   "articles/container-registry/artifact-cache-overview.md")


def _props(model: Any) -> dict[str, Any]:
    return (model.as_dict().get("properties") or {}) if model is not None else {}


def check_registry(arm: Arm, plan: ClusterPlan) -> list[Result]:
    name, rg = plan.registry.name, arm.resource_group
    try:
        registry = _props(arm.registry.registries.get(rg, name))
    except not_found():
        return [REGISTRY.failed(name, f"no registry {name} in resource group {rg}", "run pulumi up for this stack")]
    results = []
    login = str(registry.get("loginServer", ""))
    if login.lower() != plan.registry.login_server or registry.get("provisioningState") != "Succeeded":
        results.append(REGISTRY.failed(name, f"login server {login}, provisioning {registry.get('provisioningState')}",
                                       f"every image names {plan.registry.login_server}: set cluster.registry.name to "
                                       "the registry's name, or run pulumi up"))
    else:
        results.append(REGISTRY.passed(name, f"{login}, provisioned"))
    live = {r.as_dict().get("name"): _props(r) for r in arm.registry.cache_rules.list(rg, name)}
    for rule in plan.registry.cache_rules:
        results.append(_rule_verdict(rule.name, rule.source_repository, rule.target_repository,
                                     rule.credential_set, live.get(rule.name)))
    if any(rule.credential_set for rule in plan.registry.cache_rules):
        results.append(_credentials_verdict(arm, rg, name))
    return results


def _rule_verdict(name: str, source: str, target: str, credential_set: str | None,
                  live: dict[str, Any] | None) -> Result:
    subject = f"cache rule {name} ({target} <= {source})"
    fix = "run pulumi up (components/azure/registry.py declares every rule); az acr cache show -r <registry> -n " + name
    if live is None:
        return REGISTRY.failed(subject, "missing: images under this prefix do not pull", fix)
    problems = []
    if live.get("sourceRepository") != source or live.get("targetRepository") != target:
        problems.append(f"maps {live.get('targetRepository')} <= {live.get('sourceRepository')}")
    if live.get("provisioningState") != "Succeeded":
        problems.append(f"provisioning {live.get('provisioningState')}")
    if credential_set and not str(live.get("credentialSetResourceId") or "").endswith(f"/{credential_set}"):
        problems.append(f"no credential set {credential_set} (the upstream needs credentials)")
    if problems:
        return REGISTRY.failed(subject, "; ".join(problems), fix)
    return REGISTRY.passed(subject, "provisioned as planned")


def _credentials_verdict(arm: Arm, rg: str, registry: str) -> Result:
    subject = f"credential set {DOCKER_HUB_CREDENTIALS}"
    fix = ("check the Key Vault secrets cluster.registry.dockerHub names and the credential set identity's Key Vault "
           "Secrets User role (docs/registry.md); az acr credential-set show -r " + registry + " -n " +
           DOCKER_HUB_CREDENTIALS)
    try:
        props = _props(arm.registry.credential_sets.get(rg, registry, DOCKER_HUB_CREDENTIALS))
    except not_found():
        return REGISTRY.failed(subject, "missing: Docker Hub images do not pull", fix)
    unhealthy = [f"{c.get('name')}: {(c.get('credentialHealth') or {}).get('status')} "
                 f"{(c.get('credentialHealth') or {}).get('errorMessage') or ''}".strip()
                 for c in props.get("authCredentials") or []
                 if (c.get("credentialHealth") or {}).get("status") != "Healthy"]
    if unhealthy or not props.get("authCredentials"):
        return REGISTRY.failed(subject, "; ".join(unhealthy) or "no credentials", fix)
    return REGISTRY.passed(subject, "every credential Healthy")
