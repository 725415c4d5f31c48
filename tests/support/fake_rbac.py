"""kube-apiserver's authorization for the fake API server (tests/support/fake_kube.py): the verb and resource of a request,
then RBAC against the ClusterRoles, Roles and bindings the plan renders. Sources read:

- k8s.io/apiserver tag kubernetes-1.36.3 (commit 72f5171b; the snapshot had no kubernetes-1.36.4, the stacks' patch)
  `pkg/endpoints/request/requestinfo.go` `NewRequestInfo`: the verb from the method (POST create, GET/HEAD get, PUT
  update, PATCH patch, DELETE delete); `/namespaces/<ns>/<resource>` scopes a namespaced resource; parts
  resource/name/subresource; a GET without a name is `watch` when the `watch` parameter is set (and not "false" or
  "0"), else `list`, and a `fieldSelector` of `metadata.name=<n>` names the object; a DELETE without a name is
  `deletecollection`; the legacy `/watch/` path prefix sets the verb to `watch`.
- same tag, `pkg/endpoints/handlers/responsewriters/errors.go` `ForbiddenStatusError`, `forbiddenMessage`: the 403.
- kubernetes/kubernetes `plugin/pkg/auth/authorizer/rbac/rbac.go` `RuleAllows` and `pkg/apis/rbac/v1/
  evaluation_helpers.go` (VerbMatches, APIGroupMatches, ResourceMatches with `*` and `*/<subresource>`,
  ResourceNameMatches: no names means all), read at commits 01aa0f3f and 03bf11a3 (not a 1.36 tag).
- A ClusterRoleBinding grants its role everywhere; a RoleBinding grants its Role or ClusterRole only in the
  binding's namespace (kubernetes.io/docs/reference/access-authn-authz/rbac/, "RoleBinding and ClusterRoleBinding").
  A service account's user is `system:serviceaccount:<ns>:<name>` with groups `system:serviceaccounts`,
  `system:serviceaccounts:<ns>` and `system:authenticated` (same page, "Referring to subjects").
- The default ClusterRoles and bindings every server holds whatever is applied (`BOOTSTRAP`, as kube-apiserver 1.36.4
  serves them: kubernetes/kubernetes `plugin/pkg/auth/authorizer/rbac/bootstrappolicy/policy.go`), and a request
  without a token is `system:anonymous` in `system:unauthenticated` (kube-apiserver's default --anonymous-auth=true);
  e2e/tests/test_fake_conformance.py holds both against the real server.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

API_PREFIXES = ("api", "apis")
NAMESPACE_SUBRESOURCES = ("status", "finalize")
ANONYMOUS = ("system:anonymous", ("system:unauthenticated",))


def _default_role(name: str, rules: list[dict[str, Any]], *groups: str) -> list[dict[str, Any]]:
    subjects = [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": g} for g in groups]
    return [{"kind": "ClusterRole", "metadata": {"name": name}, "rules": rules},
            {"kind": "ClusterRoleBinding", "metadata": {"name": name}, "subjects": subjects,
             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name}}]


_HEALTH = ["/healthz", "/livez", "/readyz", "/version", "/version/"]
BOOTSTRAP: list[dict[str, Any]] = [
    *_default_role("system:basic-user", [
        {"apiGroups": ["authorization.k8s.io"], "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
         "verbs": ["create"]},
        {"apiGroups": ["authentication.k8s.io"], "resources": ["selfsubjectreviews"], "verbs": ["create"]}],
        "system:authenticated"),
    *_default_role("system:discovery", [{"nonResourceURLs": ["/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez",
                                                             "/openapi", "/openapi/*", "/readyz", "/version", "/version/"],
                                         "verbs": ["get"]}], "system:authenticated"),
    *_default_role("system:public-info-viewer", [{"nonResourceURLs": _HEALTH, "verbs": ["get"]}],
                   "system:authenticated", "system:unauthenticated"),
    *_default_role("system:service-account-issuer-discovery", [{"nonResourceURLs": [
        "/.well-known/openid-configuration", "/.well-known/openid-configuration/", "/openid/v1/jwks", "/openid/v1/jwks/"],
        "verbs": ["get"]}], "system:serviceaccounts"),
]
"""The default roles a service account or an anonymous request reaches on any cluster (read from kube-apiserver
1.36.4 with `kubectl get clusterrole,clusterrolebinding <name>`); the others name users and groups of the control
plane itself."""


@dataclass(frozen=True)
class RequestInfo:
    resource_request: bool
    verb: str
    path: str
    api_group: str = ""
    namespace: str = ""
    resource: str = ""
    subresource: str = ""
    name: str = ""


def request_info(method: str, path: str, query: Mapping[str, str]) -> RequestInfo:
    """requestinfo.go NewRequestInfo for the API prefixes `api` (groupless) and `apis`."""
    verb = method.lower()
    parts = [p for p in path.strip("/").split("/") if p]
    if len(parts) < 3 or parts[0] not in API_PREFIXES:
        return RequestInfo(False, verb, path)
    prefix, parts = parts[0], parts[1:]
    group = ""
    if prefix == "apis":
        if len(parts) < 3:
            return RequestInfo(False, verb, path)
        group, parts = parts[0], parts[1:]
    parts = parts[1:]  # the version
    if parts[0] in ("proxy", "watch"):
        verb, parts = parts[0], parts[1:]
    else:
        verb = {"POST": "create", "GET": "get", "HEAD": "get", "PUT": "update", "PATCH": "patch",
                "DELETE": "delete"}.get(method, "")
    namespace = ""
    if parts[0] == "namespaces" and len(parts) > 1:
        namespace = parts[1]
        if len(parts) > 2 and parts[2] not in NAMESPACE_SUBRESOURCES:
            parts = parts[2:]
    resource = parts[0]
    name = parts[1] if len(parts) >= 2 else ""
    subresource = parts[2] if len(parts) >= 3 and verb != "proxy" else ""
    if not name and verb == "get":
        watch = query.get("watch")
        verb = "watch" if watch is not None and watch.lower() not in ("false", "0") else "list"
        selector = query.get("fieldSelector") or ""
        if selector.startswith("metadata.name=") and "," not in selector:
            name = selector.partition("=")[2]
    if not name and verb == "delete":
        verb = "deletecollection"
    return RequestInfo(True, verb, path, group, namespace, resource, subresource, name)


def service_account_user(namespace: str, name: str) -> tuple[str, tuple[str, ...]]:
    return (f"system:serviceaccount:{namespace}:{name}",
            ("system:serviceaccounts", f"system:serviceaccounts:{namespace}", "system:authenticated"))


def _rule_allows(info: RequestInfo, rule: Mapping[str, Any]) -> bool:
    verbs = rule.get("verbs") or []
    if "*" not in verbs and info.verb not in verbs:
        return False
    if not info.resource_request:
        urls = rule.get("nonResourceURLs") or []
        return any(u == "*" or u == info.path or (u.endswith("*") and info.path.startswith(u.rstrip("*")))
                   for u in urls)
    groups = rule.get("apiGroups") or []
    if "*" not in groups and info.api_group not in groups:
        return False
    combined = f"{info.resource}/{info.subresource}" if info.subresource else info.resource
    resources = rule.get("resources") or []
    if not any(r in ("*", combined) or (info.subresource and r == f"*/{info.subresource}") for r in resources):
        return False
    names = rule.get("resourceNames") or []
    return not names or info.name in names


class Rbac:
    """The RBAC authorizer over a set of rendered objects (other kinds are ignored) and the server's defaults."""

    def __init__(self, objects: Iterable[Mapping[str, Any]]) -> None:
        self.cluster_roles: dict[str, list[Mapping[str, Any]]] = {}
        self.roles: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
        self.bindings: list[Mapping[str, Any]] = []
        for o in [*BOOTSTRAP, *objects]:
            kind, meta = o.get("kind"), o.get("metadata") or {}
            if kind == "ClusterRole":
                self.cluster_roles[meta["name"]] = list(o.get("rules") or [])
            elif kind == "Role":
                self.roles[(meta["namespace"], meta["name"])] = list(o.get("rules") or [])
            elif kind in ("ClusterRoleBinding", "RoleBinding"):
                self.bindings.append(o)

    @staticmethod
    def _names(subject: Mapping[str, Any], user: str, groups: tuple[str, ...]) -> bool:
        kind = subject.get("kind")
        if kind == "ServiceAccount":
            return user == f"system:serviceaccount:{subject.get('namespace')}:{subject.get('name')}"
        if kind == "User":
            return user == subject.get("name")
        return kind == "Group" and subject.get("name") in groups

    def _rules(self, binding: Mapping[str, Any]) -> list[Mapping[str, Any]]:
        ref = binding["roleRef"]
        if ref["kind"] == "ClusterRole":
            return self.cluster_roles.get(ref["name"], [])
        return self.roles.get((binding["metadata"]["namespace"], ref["name"]), [])

    def allows(self, user: str, groups: tuple[str, ...], info: RequestInfo) -> bool:
        for binding in self.bindings:
            if binding["kind"] == "RoleBinding" and binding["metadata"]["namespace"] != info.namespace:
                continue
            if not any(self._names(s, user, groups) for s in binding.get("subjects") or []):
                continue
            if any(_rule_allows(info, rule) for rule in self._rules(binding)):
                return True
        return False


def forbidden(user: str, info: RequestInfo) -> dict[str, Any]:
    """The Status body of the 403: responsewriters/errors.go's message, passed to apierrors.NewForbidden with the
    group, resource and name of the request; without a resource NewForbidden's message is `forbidden: <reason>`, and
    empty detail fields are left out (omitempty)."""
    if not info.resource_request:
        message = f'forbidden: User "{user}" cannot {info.verb} path "{info.path}"'
    else:
        resource = f"{info.resource}/{info.subresource}" if info.subresource else info.resource
        scope = f'in the namespace "{info.namespace}"' if info.namespace else "at the cluster scope"
        qualified = f"{info.resource}.{info.api_group}" if info.api_group else info.resource
        what = f'{qualified} "{info.name}"' if info.name else qualified
        message = (f'{what} is forbidden: User "{user}" cannot {info.verb} resource "{resource}" in API group '
                   f'"{info.api_group}" {scope}')
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
            "reason": "Forbidden",
            "details": {k: v for k, v in (("name", info.name), ("group", info.api_group), ("kind", info.resource)) if v},
            "code": 403}
