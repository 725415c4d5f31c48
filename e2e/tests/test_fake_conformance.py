"""The fake API server the offline suites use (tests/support/fake_kube.py, fake_rbac.py) held against the real
kube-apiserver: the same requests go to both, seeded with the same objects, and the answers must agree in status code,
content type, JSON encoding (indented or compact, byte for byte as Go writes it), kind and apiVersion, every field of
a Status body, a list's items and `continue`, and the fields each request is about. With RBAC, both authorize by the
same Roles and bindings: the real server's own cluster-admin binding for the admin, and ours for a ServiceAccount.
"""

from __future__ import annotations

import copy
import json
import ssl
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import pytest
import yaml

from e2e import control_plane as cp
from e2e.cluster import kubectl
from e2e.report import E2EReport
from tests.support.fake_kube import FakeKube, go_json
from tests.support.fake_rbac import service_account_user

NAMESPACE = "zz-fake-conformance"
"""Sorts after every other namespace, and the nodes below after every other node, so a page that ends at our last
object ends the list on the real server as on the fake (etcd's range has nothing after it)."""
NODES = ("zz-conformance-0", "zz-conformance-1")
LABEL = {"gpucluster.io/conformance": "fake"}
SELECTOR = quote("gpucluster.io/conformance=fake")
NOTE = "a<b & c>d \u00fc \u2028"
"""An annotation Go's encoder escapes in part (<, >, &, U+2028) and leaves in part (ü)."""
ACCOUNT = "conformance-reader"
ADMIN_TOKEN = "conformance-admin"
"""The fake's stand-in for the real server's admin client certificate (user kubernetes-admin, group
kubeadm:cluster-admins, which the real server binds to cluster-admin)."""
ADMIN = ("kubernetes-admin", ("kubeadm:cluster-admins", "system:authenticated"))
USER_AGENT = "gpucluster-conformance"
LEASES = f"/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases"
PODS = f"/api/v1/namespaces/{NAMESPACE}/pods"


@dataclass(frozen=True)
class Answer:
    status: int
    content_type: str
    raw: bytes

    def json(self) -> Any:
        return json.loads(self.raw)


@dataclass(frozen=True)
class Side:
    """One API server as a client reaches it: the real one over TLS (presenting the admin client certificate when
    `context` holds it), the fake over plain HTTP; `token` is sent as a bearer token, none is sent without it."""

    base: str
    context: ssl.SSLContext | None = None
    token: str | None = None

    def call(self, method: str, path: str, body: Any = None, content_type: str = "application/json",
             user_agent: str = USER_AGENT) -> Answer:
        headers = {"User-Agent": user_agent, "Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = content_type
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.base + path, data=data, method=method, headers=headers)
        handlers: list[urllib.request.BaseHandler] = [urllib.request.ProxyHandler({})]  # loopback, whatever the proxy
        if self.context is not None:
            handlers.append(urllib.request.HTTPSHandler(context=self.context))
        try:
            with urllib.request.build_opener(*handlers).open(request, timeout=30) as response:
                return Answer(response.status, response.headers.get("Content-Type", ""), response.read())
        except urllib.error.HTTPError as error:
            return Answer(error.code, error.headers.get("Content-Type", ""), error.read())

    def as_(self, token: str | None, context: ssl.SSLContext | None = None) -> Side:
        return Side(self.base, context if context is not None else self.context, token)


@dataclass
class World:
    real: Side
    fake: Side
    real_ca: ssl.SSLContext
    """Verifies the real server without presenting a client certificate: bearer tokens and anonymous requests."""
    account_token: str
    kube: FakeKube

    def pair(self, token: str | None = None, anonymous: bool = False) -> tuple[Side, Side]:
        """The real and the fake side as the admin, as the ServiceAccount (`token`), or without credentials."""
        if anonymous or token is not None:
            return self.real.as_(token, self.real_ca), self.fake.as_(token)
        return self.real, self.fake


def _dig(doc: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        doc = doc.get(key) if isinstance(doc, dict) else None
    return doc


def _encoding(raw: bytes, doc: Any) -> str:
    """How the body is written, judged by re-encoding it as Go does (tests/support/fake_kube.py go_json): for the
    real server this checks that encoder byte for byte."""
    if raw == go_json(doc, pretty=True):
        return "indented"
    return "compact" if raw == go_json(doc) else "neither"


def shape(answer: Answer, fields: tuple[tuple[str, ...], ...] = ()) -> dict[str, Any]:
    """What must agree. Values the servers make up themselves (resourceVersion, uid, timestamps, continue tokens) are
    compared by presence only."""
    found: dict[str, Any] = {"http status": answer.status, "content type": answer.content_type.split(";")[0]}
    if found["content type"] != "application/json":
        return found | {"body": answer.raw.decode(errors="replace")}
    doc = answer.json()
    found |= {"encoding": _encoding(answer.raw, doc), "kind": doc.get("kind"), "apiVersion": doc.get("apiVersion")}
    if doc.get("kind") == "Status":
        details = doc.get("details")
        return found | {k: doc.get(k) for k in ("metadata", "status", "code", "reason", "message")} | {
            "details": {k: "<uid>" if k == "uid" else v for k, v in details.items()} if details is not None else None}
    meta = doc.get("metadata") or {}
    if "items" in doc:
        return found | {"names": [i["metadata"]["name"] for i in doc["items"]], "continue": "continue" in meta,
                        "items carry kind": sorted({k for i in doc["items"] for k in ("kind", "apiVersion") if k in i})}
    return found | {"name": meta.get("name"), "uid": "uid" in meta, "resourceVersion": "resourceVersion" in meta,
                    **{".".join(f): _dig(doc, f) for f in fields}}


def watch_shape(answer: Answer) -> dict[str, Any]:
    """A watch's answer: every event a line of compact JSON (Go's json.Encoder), the same events in the same order with
    the same objects' kinds and names; bookmarks apart, by count and by the keys of their objects."""
    lines = answer.raw.decode().splitlines()
    events = [json.loads(line) for line in lines]
    bookmarks = [e["object"] for e in events if e["type"] == "BOOKMARK"]
    return {"http status": answer.status, "content type": answer.content_type.split(";")[0],
            "lines as Go's json.Encoder": all(go_json(e) == f"{line}\n".encode() for e, line in zip(events, lines, strict=True)),
            "events": [(e["type"], e["object"].get("kind"), e["object"].get("apiVersion"), e["object"]["metadata"].get("name"))
                       for e in events if e["type"] != "BOOKMARK"],
            "bookmarks": len(bookmarks),
            "bookmark objects": sorted({(*sorted(b), *(f"metadata.{k}" for k in sorted(b["metadata"]))) for b in bookmarks})}


KNOWN: dict[tuple[str, str], str] = {
    ("watch a Lease, bookmarks allowed", "bookmarks"):
        "the real watch cache sends bookmarks on a timer (k8s.io/apiserver pkg/storage/cacher): about each second while "
        "the resource is written during the watch and 2 s before the timeout, sometimes twice at one version, none when "
        "nothing about it moves; the fake answers a watch at once and ends it with one bookmark at its current version",
    ("watch a Lease, bookmarks allowed", "bookmark objects"):
        "when the real server sends a bookmark its object carries the kind's zero-valued fields as Go writes an empty "
        "struct (a Lease's `\"spec\":{}`); the fake, which holds no schemas, sends kind, apiVersion and metadata only",
}
"""(scenario, compared field) where the fake is known to answer otherwise, and why: recorded as "fake differs"."""


def compare_shapes(report: E2EReport, name: str, theirs: dict[str, Any], ours: dict[str, Any]) -> list[str]:
    differs = sorted(k for k in theirs.keys() | ours.keys() if theirs.get(k) != ours.get(k))
    known = {k: KNOWN[(name, k)] for k in differs if (name, k) in KNOWN}
    report.scenario(f"fake API server answers as kube-apiserver: {name}", "fake differs" if differs else "passed",
                    real=theirs, **({"fake": ours, "differs": differs} if differs else {}), **({"known": known} if known else {}))
    return [f"{name}: {k}: real {theirs.get(k)!r}, fake {ours.get(k)!r}" for k in differs if k not in known]


def compare(report: E2EReport, name: str, real: Answer, fake: Answer,
            fields: tuple[tuple[str, ...], ...] = ()) -> list[str]:
    return compare_shapes(report, name, shape(real, fields), shape(fake, fields))


def both(world: World, report: E2EReport, name: str, method: str, path: str, body: Any = None,
         fields: tuple[tuple[str, ...], ...] = (), sides: tuple[Side, Side] | None = None,
         **call: str) -> tuple[list[str], Answer, Answer]:
    """The same request to both servers, compared."""
    real_side, fake_side = sides or world.pair()
    real = real_side.call(method, path, copy.deepcopy(body), **call)
    fake = fake_side.call(method, path, copy.deepcopy(body), **call)
    return compare(report, name, real, fake, fields), real, fake


def both_own(world: World, report: E2EReport, name: str, own: tuple[str, str], request: Callable[[Side, str], Answer],
             fields: tuple[tuple[str, ...], ...] = (), shaped: Callable[[Answer], dict[str, Any]] | None = None
             ) -> tuple[list[str], Answer, Answer]:
    """A request that carries what each server made up itself (`own`: the real one's, then the fake's resourceVersion
    or continue token), compared."""
    real_side, fake_side = world.pair()
    real, fake = request(real_side, own[0]), request(fake_side, own[1])
    if shaped is not None:
        return compare_shapes(report, name, shaped(real), shaped(fake)), real, fake
    return compare(report, name, real, fake, fields), real, fake


def each(world: World, report: E2EReport, name: str, own: tuple[str, str], request: Callable[[Side, str], Answer],
         fields: tuple[tuple[str, ...], ...] = (), shaped: Callable[[Answer], dict[str, Any]] | None = None) -> list[str]:
    return both_own(world, report, name, own, request, fields, shaped)[0]


def _continue(real: Answer, fake: Answer) -> tuple[str, str]:
    return real.json()["metadata"]["continue"], fake.json()["metadata"]["continue"]


def _version(real: Answer, fake: Answer) -> tuple[str, str]:
    return real.json()["metadata"]["resourceVersion"], fake.json()["metadata"]["resourceVersion"]


def _node(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": dict(LABEL), "annotations": {"gpucluster.io/note": NOTE}}}


def _pod(name: str, node: str, app: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": NAMESPACE, "labels": {"app": app}},
            "spec": {"nodeName": node, "serviceAccountName": ACCOUNT, "automountServiceAccountToken": False,
                     "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10.1"}]}}


def _lease(name: str, holder: str, version: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": NAMESPACE}
    if version is not None:
        meta["resourceVersion"] = version
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": meta, "spec": {"holderIdentity": holder}}


def _rbac() -> list[dict[str, Any]]:
    """Get and list nodes everywhere (a ClusterRole), get Leases in our namespace only (a Role)."""
    group = "rbac.authorization.k8s.io"
    subject = [{"kind": "ServiceAccount", "name": ACCOUNT, "namespace": NAMESPACE}]
    return [
        {"apiVersion": f"{group}/v1", "kind": "ClusterRole", "metadata": {"name": "gpucluster-conformance-nodes"},
         "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list"]}]},
        {"apiVersion": f"{group}/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "gpucluster-conformance-nodes"},
         "roleRef": {"apiGroup": group, "kind": "ClusterRole", "name": "gpucluster-conformance-nodes"}, "subjects": subject},
        {"apiVersion": f"{group}/v1", "kind": "Role", "metadata": {"name": "conformance-leases", "namespace": NAMESPACE},
         "rules": [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get"]}]},
        {"apiVersion": f"{group}/v1", "kind": "RoleBinding", "metadata": {"name": "conformance-leases", "namespace": NAMESPACE},
         "roleRef": {"apiGroup": group, "kind": "Role", "name": "conformance-leases"}, "subjects": subject},
    ]


def _kubectl_json(plane: cp.ControlPlane, *args: str) -> dict[str, Any]:
    done = kubectl(plane, *args, "-o", "json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.fixture(scope="module")
def world(control_plane: cp.ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    plane = control_plane
    context, server = plane.admin_context()
    real_ca = ssl.create_default_context(cafile=str(plane.pki / "ca.crt"))
    real = Side(server, context)
    for args in (("create", "namespace", NAMESPACE), ("create", "serviceaccount", ACCOUNT, "-n", NAMESPACE)):
        done = kubectl(plane, *args)
        assert done.returncode == 0 or "AlreadyExists" in done.stderr, done.stderr
    rbac = _rbac()
    applied = kubectl(plane, "apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": rbac}))
    assert applied.returncode == 0, applied.stderr
    kubeconfig = cp.service_account_kubeconfig(plane, NAMESPACE, ACCOUNT, tmp_path_factory.mktemp("conformance"))
    token = yaml.safe_load(kubeconfig.read_text())["users"][0]["user"]["token"]
    # The real server's own admin authorization, handed to the fake as it stands.
    admin_objects = [_kubectl_json(plane, "get", "clusterrole", "cluster-admin"),
                     _kubectl_json(plane, "get", "clusterrolebinding", "kubeadm:cluster-admins")]

    kube = FakeKube()
    kube.enforce([*admin_objects, *rbac], {ADMIN_TOKEN: ADMIN, token: service_account_user(NAMESPACE, ACCOUNT)})
    pods = [_pod("p0", NODES[0], "a"), _pod("p1", NODES[0], "b"), _pod("p2", NODES[1], "a")]
    seeds = [("/api/v1/nodes", _node(n)) for n in NODES] + [(PODS, p) for p in pods] + [(LEASES, _lease("held", "a"))]
    for collection, obj in seeds:  # through the real API, and the fake's own seeding
        created = real.call("POST", collection, obj)
        assert created.status == 201, created.raw[:400]
        kube.put_object(collection, copy.deepcopy(obj))
    with kube.running():
        yield World(real, Side(kube.url, token=ADMIN_TOKEN), real_ca, token, kube)
    # The control plane serves the session's other scenarios: nothing of ours stays on it.
    for args in (("delete", "namespace", NAMESPACE, "--wait=false"), ("delete", "node", *NODES),
                 ("delete", "clusterrolebinding,clusterrole", "gpucluster-conformance-nodes")):
        kubectl(plane, *args, "--ignore-not-found")


def test_reads_of_nodes(world: World, report: E2EReport) -> None:
    differences, _, _ = both(world, report, "GET an existing node", "GET", f"/api/v1/nodes/{NODES[0]}",
                             # the annotation the test set: kube-controller-manager's TTL controller adds its own
                             fields=(("metadata", "labels"), ("metadata", "annotations", "gpucluster.io/note")))
    differences += both(world, report, "GET a missing node", "GET", "/api/v1/nodes/zz-conformance-missing")[0]
    found, real, fake = both(world, report, "LIST nodes, limit 1 of 2", "GET", f"/api/v1/nodes?limit=1&labelSelector={SELECTOR}")
    differences += found
    assert real.json()["metadata"].get("continue") and fake.json()["metadata"].get("continue")
    differences += each(world, report, "LIST nodes, the continue page", _continue(real, fake), lambda side, token: side.call(
        "GET", f"/api/v1/nodes?limit=1&labelSelector={SELECTOR}&continue={quote(token)}"))
    differences += both(world, report, "GET a path nothing serves", "GET", "/apis/nothing.example.com")[0]
    assert not differences, "\n".join(differences)


def test_writes_to_nodes(world: World, report: E2EReport) -> None:
    node = f"/api/v1/nodes/{NODES[0]}"
    differences = both(world, report, "POST a node that exists", "POST", "/api/v1/nodes", _node(NODES[1]))[0]
    before = _version(*(side.call("GET", node) for side in world.pair()))
    differences += both(world, report, "merge patch", "PATCH", node, {"metadata": {"labels": {"step": "merged"}}},
                        fields=(("metadata", "labels"),), content_type="application/merge-patch+json")[0]
    differences += each(world, report, "PUT a node with a stale resourceVersion", before, lambda side, rv: side.call(
        "PUT", node, {**_node(NODES[0]), "metadata": {**_node(NODES[0])["metadata"], "resourceVersion": rv}}))
    differences += each(world, report, "merge patch with a stale resourceVersion", before, lambda side, rv: side.call(
        "PATCH", node, {"metadata": {"resourceVersion": rv, "labels": {"step": "stale"}}},
        content_type="application/merge-patch+json"))
    differences += both(world, report, "JSON patch whose test op fails", "PATCH", node,
                        [{"op": "test", "path": "/metadata/labels/step", "value": "other"},
                         {"op": "replace", "path": "/metadata/labels/step", "value": "never"}],
                        content_type="application/json-patch+json")[0]
    differences += both(world, report, "JSON patch whose test op passes", "PATCH", node,
                        [{"op": "test", "path": "/metadata/labels/step", "value": "merged"},
                         {"op": "replace", "path": "/metadata/labels/step", "value": "patched"}],
                        fields=(("metadata", "labels"),), content_type="application/json-patch+json")[0]
    assert not differences, "\n".join(differences)


def test_a_lease_in_a_namespace(world: World, report: E2EReport) -> None:
    lease = f"{LEASES}/conformance"
    holder = (("spec", "holderIdentity"),)
    differences = both(world, report, "Lease create", "POST", LEASES, _lease("conformance", "a"), holder)[0]
    differences += both(world, report, "Lease create again", "POST", LEASES, _lease("conformance", "a"))[0]
    found, real, fake = both(world, report, "Lease get", "GET", lease, fields=holder)
    differences += found
    versions = _version(real, fake)
    differences += each(world, report, "Lease update at its resourceVersion", versions,
                        lambda side, rv: side.call("PUT", lease, _lease("conformance", "b", rv)), holder)
    differences += each(world, report, "Lease update at a stale resourceVersion", versions,
                        lambda side, rv: side.call("PUT", lease, _lease("conformance", "c", rv)))
    differences += both(world, report, "Lease get after the update", "GET", lease, fields=holder)[0]
    differences += both(world, report, "Lease get, missing", "GET", f"{LEASES}/missing")[0]
    differences += both(world, report, "Lease delete", "DELETE", lease)[0]
    differences += both(world, report, "Lease get after the delete", "GET", lease)[0]
    assert not differences, "\n".join(differences)


def test_a_watch_from_a_lists_version(world: World, report: E2EReport) -> None:
    """Each side's own list version, a Lease created after it, then a 4 s watch from that version."""
    differences: list[str] = []
    for bookmarks in (True, False):
        listed = _version(*(side.call("GET", LEASES) for side in world.pair()))
        for side in world.pair():
            created = side.call("POST", LEASES, _lease(f"watched-{bookmarks}".lower(), "a"))
            assert created.status == 201, created.raw[:300]
        query = "&allowWatchBookmarks=true" if bookmarks else ""
        scenario = f"watch a Lease, bookmarks {'allowed' if bookmarks else 'not asked for'}"
        differences += each(world, report, scenario, listed, lambda side, rv, query=query: side.call(
            "GET", f"{LEASES}?watch=1&resourceVersion={rv}&timeoutSeconds=4{query}"), shaped=watch_shape)
    assert not differences, "\n".join(differences)


def test_pods_by_node_and_label(world: World, report: E2EReport) -> None:
    on = quote(f"spec.nodeName={NODES[0]}")
    differences = both(world, report, "pods of one node with one label, in a namespace", "GET",
                       f"{PODS}?fieldSelector={on}&labelSelector={quote('app=a')}")[0]
    differences += both(world, report, "pods of one node, all namespaces", "GET", f"/api/v1/pods?fieldSelector={on}")[0]
    found, real, fake = both(world, report, "pods of one node, all namespaces, limit 1", "GET",
                             f"/api/v1/pods?fieldSelector={on}&limit=1")
    differences += found
    # The second page ends at p1 with p2 (another node's) after it: etcd's range is not exhausted, so `continue` is
    # set, and the third page is empty.
    for page in ("second", "third"):
        if not all(a.json()["metadata"].get("continue") for a in (real, fake)):
            break  # already recorded as a difference
        found, real, fake = both_own(world, report, f"pods of one node, the {page} page", _continue(real, fake),
                                     lambda side, token: side.call("GET", f"/api/v1/pods?fieldSelector={on}&limit=1&"
                                                                          f"continue={quote(token)}"))
        differences += found
    assert not differences, "\n".join(differences)


ENCODINGS = [
    ("curl/8.5.0", ""), ("Wget/1.21.4", ""), ("Mozilla/5.0 (X11; Linux x86_64)", ""), ("Mozilla/4.0", ""), ("Curl", ""),
    (USER_AGENT, "pretty=true"), (USER_AGENT, "pretty=1"), ("curl/8.5.0", "pretty=false"), (USER_AGENT, "pretty=yes"),
    (USER_AGENT, ""),
]
"""(User-Agent, query): the prefixes isPrettyPrint knows and near misses, and `pretty` overriding them either way."""


def test_json_is_indented_as_kube_apiserver_decides(world: World, report: E2EReport) -> None:
    """negotiation.isPrettyPrint: the `pretty` parameter when given, else the User-Agent's prefix."""
    differences = []
    for agent, query in ENCODINGS:
        for what, path in (("a node", f"/api/v1/nodes/{NODES[0]}"), ("a Status", "/api/v1/nodes/zz-conformance-missing"),
                           ("a list", f"/api/v1/nodes?labelSelector={SELECTOR}")):
            target = f"{path}{'&' if '?' in path else '?'}{query}" if query else path
            differences += both(world, report, f"{what} for User-Agent {agent!r}{' ?' + query if query else ''}", "GET",
                                target, user_agent=agent)[0]
    node = f"/api/v1/nodes/{NODES[0]}"
    assert shape(world.real.call("GET", node, user_agent="curl/8.5.0"))["encoding"] == "indented"
    assert shape(world.real.call("GET", node))["encoding"] == "compact"
    assert not differences, "\n".join(differences)


def test_rbac_refuses_and_allows_alike(world: World, report: E2EReport) -> None:
    account = world.pair(world.account_token)
    differences: list[str] = []
    for name, method, path in (
        ("ServiceAccount gets a node (ClusterRole)", "GET", f"/api/v1/nodes/{NODES[0]}"),
        ("ServiceAccount lists nodes (ClusterRole)", "GET", f"/api/v1/nodes?labelSelector={SELECTOR}"),
        ("ServiceAccount gets a Lease in its namespace (Role)", "GET", f"{LEASES}/held"),
        ("ServiceAccount lists pods in its namespace: forbidden", "GET", PODS),
        ("ServiceAccount lists Leases: forbidden (no list verb)", "GET", LEASES),
        ("ServiceAccount deletes a node: forbidden", "DELETE", "/api/v1/nodes/zz-conformance-absent"),
        ("ServiceAccount lists pods by metadata.name: forbidden, named", "GET", "/api/v1/pods?fieldSelector=metadata.name%3Dp0"),
        ("ServiceAccount gets a path no role names: forbidden", "GET", "/healthz-conformance"),
        ("ServiceAccount gets a discovery path (system:discovery)", "GET", "/apis/nothing.example.com"),
    ):
        differences += both(world, report, name, method, path, sides=account)[0]
    differences += both(world, report, "ServiceAccount updates a Lease: forbidden", "PUT", f"{LEASES}/held",
                        _lease("held", "b"), sides=account)[0]
    differences += both(world, report, "an unknown token", "GET", f"/api/v1/nodes/{NODES[0]}",
                        sides=world.pair("not-a-token"))[0]
    differences += both(world, report, "no token (anonymous)", "GET", "/api/v1/nodes", sides=world.pair(anonymous=True))[0]
    user = f"system:serviceaccount:{NAMESPACE}:{ACCOUNT}"
    message = shape(account[0].call("GET", PODS))["message"]
    scope = f'in the namespace "{NAMESPACE}"'
    assert message == f'pods is forbidden: User "{user}" cannot list resource "pods" in API group "" {scope}'
    assert (user, "delete", "/api/v1/nodes/zz-conformance-absent") in world.kube.denied  # refused by the fake's RBAC
    assert not differences, "\n".join(differences)
