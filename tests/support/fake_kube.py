"""Fake Kubernetes API and Azure (IMDS token, scale-set NIC lists) servers on 127.0.0.1 for the agents' fault
suites, with faults injected per request.

Kubernetes semantics followed (kubernetes.io/docs/reference/using-api/api-concepts/): lists page with `limit` and
`continue`; a PUT or a merge patch carrying a stale `metadata.resourceVersion` is 409 Conflict; a JSON patch whose
`test` op fails is 422 (k8s.io/apiserver `pkg/endpoints/handlers/patch.go` answers a failed patch application as
StatusUnprocessableEntity); POST of an existing name is 409 AlreadyExists; selectors `labelSelector=k=v` and
`fieldSelector=spec.nodeName=N`. Answers are shaped as kube-apiserver 1.36.4 shapes them, checked against the real
server by e2e/tests/test_fake_conformance.py: JSON as Go encodes it (compact with a newline, or indented when
`isPrettyPrint` says so; `<`, `>`, `&` escaped), objects with their kind and apiVersion, lists as `<Kind>List` whose
items carry neither, Status bodies with apimachinery's messages and details, and a path nothing serves answered
`404 page not found` in plain text. Azure: `NetworkInterfaces_ListVirtualMachineScaleSetNetworkInterfaces` pages with
`value` and `nextLink` (azure-rest-api-specs network `examples/VmssNetworkInterfaceList.json`).
"""

from __future__ import annotations

import copy
import json
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.support.fake_rbac import ANONYMOUS, Rbac, forbidden, request_info


@dataclass
class Fault:
    """What to do instead of (or before) answering: a status with headers and body, a delay, a body cut short,
    a raw body. `who` limits it to one client's bearer token."""

    status: int = 0
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes | None = None
    delay: float = 0.0
    truncate: bool = False
    times: int = 1
    who: str | None = None
    trickle: float = 0.0
    """Seconds between bytes: the whole answer (status line, headers, body) is sent one byte at a time."""


@dataclass(frozen=True)
class Seen:
    at: float
    method: str
    path: str
    query: dict[str, str]
    who: str


def deep_json(depth: int) -> bytes:
    return b'{"items":' + b"[" * depth + b"]" * depth + b"}"


HANG = 3600.0
"""A fault's delay no client's timeout waits out: the answer is held until the server stops."""


class FakeHttp:
    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.faults: list[tuple[str, re.Pattern[str], Fault]] = []
        self.seen: list[Seen] = []
        self.url = ""
        self.stopped = threading.Event()
        self.clock: Callable[[], float] = time.monotonic
        """Times what `seen`, `lease_history` and `cilium_writes` record; a test may put a clock of its own here."""
        self.sleep: Callable[[float], None] = self._held
        """How a fault's `delay` is waited; a test may put its own clock's here."""

    def _held(self, seconds: float) -> None:
        """A delay, cut short when the server stops."""
        self.stopped.wait(seconds)

    def inject(self, method: str, pattern: str, fault: Fault) -> None:
        with self.lock:
            self.faults.append((method, re.compile(pattern), fault))

    def requests(self, method: str | None = None, pattern: str = "") -> list[Seen]:
        with self.lock:
            return [s for s in self.seen if (method is None or s.method == method) and re.search(pattern, s.path)]

    def _fault(self, method: str, target: str, who: str) -> Fault | None:
        with self.lock:
            for m, pattern, fault in self.faults:
                if m == method and pattern.search(target) and fault.times > 0 and fault.who in (None, who):
                    fault.times -= 1
                    return fault
        return None

    def answer(self, method: str, path: str, query: dict[str, str], body: Any, who: str) -> tuple[int, Any, dict[str, str]]:
        raise NotImplementedError

    def refuse(self, method: str, path: str, query: dict[str, str], who: str) -> tuple[int, Any] | None:
        """An authentication or authorization failure to answer instead, or None to go on."""
        return None

    def encode(self, path: str, payload: Any, pretty: bool) -> bytes:
        """The body of an answer to `path`; `pretty` is whether the client asked for indented JSON."""
        return json.dumps(payload).encode()

    def pretty(self, raw_query: str, user_agent: str) -> bool:
        return False

    @contextmanager
    def running(self) -> Iterator[FakeHttp]:
        server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        server.daemon_threads = True
        self.stopped.clear()
        self.url = f"http://127.0.0.1:{server.server_address[1]}"
        thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self.stopped.set()
            server.shutdown()
            server.server_close()


def _handler(fake: FakeHttp) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            return

        def _trickle(self, status: int, data: bytes, headers: dict[str, str], pause: float) -> None:
            lines = [f"HTTP/1.1 {status} X", *(f"{k}: {v}" for k, v in headers.items()),
                     "Content-Type: application/json", f"Content-Length: {len(data)}", "Connection: close"]
            raw = ("\r\n".join(lines) + "\r\n\r\n").encode() + data
            self.close_connection = True
            for n in range(len(raw)):
                try:
                    self.wfile.write(raw[n:n + 1])
                    self.wfile.flush()
                except OSError:  # the client gave up (its deadline under test)
                    return
                time.sleep(pause)

        def _send(self, status: int, data: bytes, headers: dict[str, str], truncate: bool = False) -> None:
            self.send_response(status)
            for key, value in headers.items():
                self.send_header(key, value)
            if "Content-Type" not in headers:
                self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            if truncate:
                self.send_header("Connection", "close")
            try:
                self.end_headers()
                self.wfile.write(data[: len(data) // 2] if truncate else data)
            except (BrokenPipeError, ConnectionResetError):  # the client gave up first (a timeout under test)
                self.close_connection = True
                return
            if truncate:
                self.close_connection = True

        def _handle(self) -> None:
            url = urlsplit(self.path)
            query = {k: v[0] for k, v in parse_qs(url.query).items()}
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            who = (self.headers.get("Authorization") or "").removeprefix("Bearer ").strip()
            with fake.lock:  # recorded on arrival: a client that gave up on a slow answer still asked
                fake.seen.append(Seen(fake.clock(), self.command, url.path, query, who))
            fault = fake._fault(self.command, self.path, who)
            if fault is not None and fault.delay:
                fake.sleep(fault.delay)
            if fault is not None and (fault.status or fault.body is not None):
                status = fault.status or 200
                data = fault.body if fault.body is not None else json.dumps(
                    {"kind": "Status", "code": status, "message": "injected"}).encode()
                if fault.trickle:
                    self._trickle(status, data, fault.headers, fault.trickle)
                    return
                self._send(status, data, fault.headers, fault.truncate)
                return
            pretty = fake.pretty(url.query, self.headers.get("User-Agent") or "")
            refused = fake.refuse(self.command, url.path, query, who)
            if refused is not None:
                self._send(refused[0], fake.encode(url.path, refused[1], pretty), {})
                return
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                body = None
            status, payload, headers = fake.answer(self.command, url.path, query, body, who)
            data = payload if isinstance(payload, bytes) else fake.encode(url.path, payload, pretty)
            self._send(status, data, headers, fault is not None and fault.truncate)

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _handle  # noqa: N815 (http.server names them)

    return Handler


NOT_FOUND_PAGE = b"404 page not found\n"
"""What kube-apiserver answers for a path no handler serves (Go's http.NotFoundHandler), in plain text."""
KINDS = {"nodes": "Node", "pods": "Pod", "leases": "Lease", "ciliumnodes": "CiliumNode", "configmaps": "ConfigMap",
         "workloads": "Workload"}
CONFLICT = "the object has been modified; please apply your changes to the latest version and try again"
"""apiserver's storage answer to a stale resourceVersion (k8s.io/apiserver pkg/registry/generic/registry/store.go)."""
_GO_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}


def pretty_print(raw_query: str, user_agent: str) -> bool:
    """k8s.io/apiserver pkg/endpoints/handlers/negotiation isPrettyPrint: a non-empty `pretty` parameter decides
    (Go's strconv.ParseBool, anything else false); without one, a User-Agent starting with curl, Wget or
    Mozilla/5.0 gets indented JSON."""
    value = (parse_qs(raw_query).get("pretty") or [""])[0] if "pretty" in raw_query else ""
    if value:
        return value in ("1", "t", "T", "TRUE", "true", "True")
    return user_agent.startswith(("curl", "Wget", "Mozilla/5.0"))


def go_json(payload: Any, pretty: bool = False) -> bytes:
    """As apimachinery's JSON serializer writes: json.Encoder (compact, one newline after) or json.MarshalIndent
    (two spaces, no newline); both escape <, > and & and the line separators U+2028/U+2029, and leave other
    non-ASCII characters as UTF-8."""
    text = json.dumps(payload, indent=2, ensure_ascii=False) if pretty else (
        json.dumps(payload, separators=(",", ":"), ensure_ascii=False) + "\n")
    return re.sub("[<>&\u2028\u2029]", lambda m: _GO_ESCAPES[m[0]], text).encode()


def resource_of(path: str) -> tuple[str, str, str] | None:
    """(group, version, resource) of a resource path, `/api/v1/...` or `/apis/<group>/<version>/...`."""
    parts = [p for p in path.strip("/").split("/") if p]
    if len(parts) >= 3 and parts[0] == "api":
        group, version, rest = "", parts[1], parts[2:]
    elif len(parts) >= 4 and parts[0] == "apis":
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        return None
    if rest[0] == "namespaces" and len(rest) >= 3:
        rest = rest[2:]
    return group, version, rest[0]


def _qualified(collection: str) -> tuple[str, dict[str, str]]:
    """apimachinery's GroupResource string (`leases.coordination.k8s.io`, `nodes`) and the Status details' group and
    kind, the empty group left out (omitempty)."""
    group, _, resource = resource_of(collection) or ("", "", collection)
    return (f"{resource}.{group}" if group else resource), ({"group": group} if group else {}) | {"kind": resource}


def _status(code: int, reason: str, message: str, details: dict[str, Any] | None = None) -> dict[str, Any]:
    """A failure Status as kube-apiserver writes it; `details` only where apimachinery sets them."""
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
            "reason": reason, **({"details": details} if details is not None else {}), "code": code}


def _object_status(collection: str, name: str, code: int, reason: str, message: str) -> dict[str, Any]:
    """apimachinery's NewNotFound / NewAlreadyExists / NewConflict for `name` in `collection`."""
    qualified, details = _qualified(collection)
    text = {"NotFound": f'{qualified} "{name}" not found', "AlreadyExists": f'{qualified} "{name}" already exists',
            "Conflict": f'Operation cannot be fulfilled on {qualified} "{name}": {message}'}[reason]
    return _status(code, reason, text, {"name": name, **details})


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


class FakeKube(FakeHttp):
    """Collections by path: `/api/v1/nodes`, `/apis/cilium.io/v2/ciliumnodes`,
    `/apis/coordination.k8s.io/v1/namespaces/<ns>/leases`, `/api/v1/namespaces/<ns>/pods` (and `/api/v1/pods`
    across namespaces, indexed by node)."""

    COLLECTIONS = re.compile(r"^(/api/v1/nodes|/apis/cilium\.io/v2/ciliumnodes|/apis/coordination\.k8s\.io/v1/"
                             r"namespaces/[^/]+/leases|/api/v1/namespaces/[^/]+/pods)(?:/([^/]+))?$")

    def __init__(self) -> None:
        super().__init__()
        self.store: dict[str, dict[str, dict[str, Any]]] = {}
        self.pods_by_node: dict[str, set[tuple[str, str]]] = {}
        self.version = 0
        self.lease_history: list[tuple[float, str]] = []
        """(time, holder) after every lease write that changed the holder."""
        self.cilium_writes: list[tuple[float, str, str | None]] = []
        """(time, writer's token, lease holder at that time) for every CiliumNode write."""
        self.before_write: Callable[[str, str, FakeKube], None] | None = None
        self.events: dict[str, list[tuple[int, str, dict[str, Any]]]] = {}
        """Per collection, (resourceVersion, type, object) of every change, for watches."""
        self.compacted = 0
        """Watches from a version below this get 410 Gone, as after etcd compaction."""
        self.rbac: Rbac | None = None
        self.users: dict[str, tuple[str, tuple[str, ...]]] = {}
        """Bearer token -> (user, groups), when `rbac` is on."""
        self.denied: list[tuple[str, str, str]] = []
        """(user, verb, path) of every request refused with 403."""

    def enforce(self, objects: list[dict[str, Any]], users: dict[str, tuple[str, tuple[str, ...]]]) -> None:
        """From now on authenticate by `users` and authorize by the RBAC objects among `objects` (tests/support/fake_rbac.py):
        401 for an unknown token, 403 with kube-apiserver's Status body for a request no rule allows."""
        with self.lock:
            self.rbac = Rbac(objects)
            self.users.update(users)

    def refuse(self, method: str, path: str, query: dict[str, str], who: str) -> tuple[int, Any] | None:
        with self.lock:
            if self.rbac is None:
                return None
            if not who:  # the stacks' API servers keep kube-apiserver's default --anonymous-auth=true
                user, groups = ANONYMOUS
            elif who not in self.users:
                return 401, _status(401, "Unauthorized", "Unauthorized")
            else:
                user, groups = self.users[who]
            info = request_info(method, path, query)
            if self.rbac.allows(user, groups, info):
                return None
            self.denied.append((user, info.verb, path))
            return 403, forbidden(user, info)

    def pretty(self, raw_query: str, user_agent: str) -> bool:
        return pretty_print(raw_query, user_agent)

    def encode(self, path: str, payload: Any, pretty: bool) -> bytes:
        return go_json(typed(path, payload), pretty)

    def put_object(self, collection: str, obj: dict[str, Any]) -> None:
        with self.lock:
            self.version += 1
            obj.setdefault("metadata", {})["resourceVersion"] = str(self.version)
            before = self.store.get(collection, {}).get(obj["metadata"]["name"])
            # The server keeps an object's uid across writes and gives a new object one (DELETE's details name it).
            obj["metadata"].setdefault("uid", (before or {}).get("metadata", {}).get("uid") or str(uuid.uuid4()))
            kind = "MODIFIED" if before is not None else "ADDED"
            self.store.setdefault(collection, {})[obj["metadata"]["name"]] = obj
            self.events.setdefault(collection, []).append((self.version, kind, obj))  # stored objects are replaced, never edited
            if collection.endswith("/pods"):
                node = (obj.get("spec") or {}).get("nodeName")
                if node:
                    self.pods_by_node.setdefault(node, set()).add((collection, obj["metadata"]["name"]))

    def get_object(self, collection: str, name: str) -> dict[str, Any] | None:
        with self.lock:
            found = self.store.get(collection, {}).get(name)
            return copy.deepcopy(found) if found is not None else None

    def holder(self) -> str | None:
        with self.lock:
            leases = [o for c, objs in self.store.items() if c.endswith("/leases") for o in objs.values()]
            return leases[0]["spec"].get("holderIdentity") if leases else None

    def answer(self, method: str, path: str, query: dict[str, str], body: Any, who: str) -> tuple[int, Any, dict[str, str]]:
        with self.lock:
            if path == "/api/v1/pods" and method == "GET":
                return 200, self._list_pods(query), {}
            match = self.COLLECTIONS.match(path)
            if match is None:
                return 404, NOT_FOUND_PAGE, {"Content-Type": "text/plain; charset=utf-8"}
            collection, name = match[1], match[2]
            objects = self.store.setdefault(collection, {})
            if name is None and method == "GET" and query.get("watch") in ("1", "true"):
                return 200, self._watch(collection, query), {}
            if name is None and method == "GET":
                return 200, self._page(list(objects.values()), query), {}
            if name is None and method == "POST":
                name = body["metadata"]["name"]
                if name in objects:
                    return 409, _object_status(collection, name, 409, "AlreadyExists", ""), {}
                return self._write(collection, name, body, who, 201)
            if name is None:
                return 405, _status(405, "MethodNotAllowed", method), {}
            current = objects.get(name)
            if current is None:
                return 404, _object_status(collection, name, 404, "NotFound", ""), {}
            if method == "GET":
                return 200, current, {}
            if method == "DELETE":
                del objects[name]
                self.version += 1
                gone = copy.deepcopy(current)
                gone["metadata"]["resourceVersion"] = str(self.version)
                self.events.setdefault(collection, []).append((self.version, "DELETED", gone))
                # registry/generic/registry/store.go Delete: a Success Status naming the object, without a code
                details = {"name": name, **_qualified(collection)[1], "uid": current["metadata"].get("uid")}
                return 200, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                             "details": {k: v for k, v in details.items() if v}}, {}
            if self.before_write is not None:
                self.before_write(method, path, self)
                current = objects[name]
            version = current["metadata"]["resourceVersion"]
            if method == "PUT":
                if (body.get("metadata") or {}).get("resourceVersion") != version:
                    return 409, _object_status(collection, name, 409, "Conflict", CONFLICT), {}
                return self._write(collection, name, body, who)
            if method == "PATCH" and isinstance(body, list):
                updated = copy.deepcopy(current)
                for op in body:
                    if op["op"] == "test" and _pointer(updated, op["path"]) != op["value"]:
                        # NewGenericServerResponse(422, ...) with no resource: its fixed message, empty details
                        return 422, _status(422, "Invalid", "the server rejected our request due to an error in our "
                                                            "request", {}), {}
                    if op["op"] in ("add", "replace"):
                        _set_pointer(updated, op["path"], op["value"])
                return self._write(collection, name, updated, who)
            if method == "PATCH":
                wanted = ((body or {}).get("metadata") or {}).get("resourceVersion")
                if wanted is not None and wanted != version:
                    return 409, _object_status(collection, name, 409, "Conflict", CONFLICT), {}
                return self._write(collection, name, merge_patch(current, body), who)
            return 405, _status(405, "MethodNotAllowed", method), {}

    def _write(self, collection: str, name: str, obj: dict[str, Any], who: str, status: int = 200
               ) -> tuple[int, Any, dict[str, str]]:
        before = self.holder()
        obj = copy.deepcopy(obj)
        obj.setdefault("metadata", {})["name"] = name
        self.put_object(collection, obj)
        now = self.clock()
        if collection.endswith("/leases") and self.holder() != before:
            self.lease_history.append((now, str(self.holder())))
        if collection.endswith("ciliumnodes"):
            self.cilium_writes.append((now, who, self.holder()))
        return status, obj, {}

    def _watch(self, collection: str, query: dict[str, str]) -> bytes:
        """The events after `resourceVersion`, one compact JSON object per line whatever the client asked for, each
        object with its kind; then, when the client allows bookmarks, a bookmark at the current version; the watch then
        ends as one whose timeoutSeconds ran out. An expired version is an ERROR event with 410. The real watch cache
        sends bookmarks on a timer instead, when the resource moved during the watch and 2 s before its timeout
        (k8s.io/apiserver pkg/storage/cacher), so when one comes is not compared (e2e/tests/test_fake_conformance.py)."""
        since = int(query.get("resourceVersion") or 0)
        if since < self.compacted:
            return go_json({"type": "ERROR", "object": _status(410, "Expired", "too old resource version")})
        events = [{"type": kind, "object": typed(collection, obj)} for version, kind, obj in self.events.get(collection, [])
                  if version > since]
        bookmarks = query.get("allowWatchBookmarks")  # Convert_Slice_string_To_bool: all but "0" and "false" is true
        if bookmarks is not None and bookmarks != "0" and bookmarks.lower() != "false":
            events.append({"type": "BOOKMARK",
                           "object": typed(collection, {"metadata": {"resourceVersion": str(self.version)}})})
        return b"".join(go_json(event) for event in events)

    def _page(self, items: list[dict[str, Any]], query: dict[str, str], last: tuple[str, str] | None = None
              ) -> dict[str, Any]:
        """A page as etcd serves a range (k8s.io/apiserver pkg/storage/etcd3 store.go GetList): objects in key order
        (namespace, name), selectors applied while walking, `limit` matching objects, and `continue` when any object,
        matching or not, lies after the page's last, so a page can carry `continue` and the next be empty. `last`: the
        collection's last key, when `items` were narrowed by an index first."""
        label = query.get("labelSelector")
        key, _, value = (label or "").partition("=")
        fields = query.get("fieldSelector")
        field, _, node = (fields or "").partition("=")
        assert not fields or field == "spec.nodeName", fields

        def matches(o: dict[str, Any]) -> bool:
            return ((not label or (o["metadata"].get("labels") or {}).get(key) == value)
                    and (not fields or (o.get("spec") or {}).get("nodeName") == node))

        token = query.get("continue") or ""
        namespace, _, name = token.rpartition("/")  # the token is the last key served: "<namespace>/<name>"
        after = (namespace, name)
        limit = int(query.get("limit") or 0)
        page: list[dict[str, Any]] = []
        more = False
        for o in sorted((o for o in items if not token or _key(o) > after), key=_key):
            if limit and len(page) >= limit:
                more = True
                break
            if matches(o):
                page.append(o)
        if limit and len(page) >= limit and not more and last is not None:
            more = _key(page[-1]) < last
        return {"kind": "List", "metadata": {"resourceVersion": str(self.version),
                                             **({"continue": "/".join(_key(page[-1]))} if more else {})},
                "items": page}

    def _list_pods(self, query: dict[str, str]) -> dict[str, Any]:
        fields = query.get("fieldSelector") or ""
        pods = [objs for c, objs in self.store.items() if c.endswith("/pods")]
        if fields.startswith("spec.nodeName="):  # the index keeps a per-node list from reading every pod
            keys = sorted(self.pods_by_node.get(fields.partition("=")[2], set()))
            items = [self.store[c][n] for c, n in keys if n in self.store.get(c, {})]
            last = max((_key(o) for objs in pods for o in objs.values()), default=("", ""))
            return self._page(items, query, last)
        return self._page([o for objs in pods for o in objs.values()], query)


def _key(obj: dict[str, Any]) -> tuple[str, str]:
    """Where etcd keeps an object, as far as order goes: its namespace (none for a cluster-scoped one), then its name."""
    meta = obj.get("metadata") or {}
    return meta.get("namespace") or "", meta.get("name") or ""


def typed(path: str, payload: Any) -> Any:
    """An object answered with its kind and apiVersion, a list as `<Kind>List` whose items carry neither, as the
    server writes them whatever the stored object holds; Status bodies and other answers unchanged."""
    found = resource_of(path)
    if not isinstance(payload, dict) or payload.get("kind") == "Status" or found is None or found[2] not in KINDS:
        return payload
    group, version, resource = found
    header = {"kind": KINDS[resource], "apiVersion": f"{group}/{version}" if group else version}
    rest = {k: v for k, v in payload.items() if k not in header}
    if "items" in payload and "metadata" in payload and "name" not in (payload.get("metadata") or {}):
        rest["items"] = [{k: v for k, v in item.items() if k not in header} for item in payload["items"]]
        return {"kind": header["kind"] + "List", "apiVersion": header["apiVersion"], **rest}
    return {**header, **rest}


def _pointer(doc: Any, pointer: str) -> Any:
    for part in pointer.strip("/").split("/"):
        doc = doc.get(part) if isinstance(doc, dict) else None
    return doc


def _set_pointer(doc: dict[str, Any], pointer: str, value: Any) -> None:
    parts = pointer.strip("/").split("/")
    for part in parts[:-1]:
        doc = doc.setdefault(part, {})
    doc[parts[-1]] = copy.deepcopy(value)


NIC_LIST = re.compile(r"^/subscriptions/(?P<sub>[^/]+)/resourceGroups/(?P<rg>[^/]+)/providers/Microsoft\.Compute/"
                      r"virtualMachineScaleSets/(?P<set>[^/]+)/networkInterfaces$", re.IGNORECASE)


class FakeAzure(FakeHttp):
    """IMDS's token endpoint and ARM's scale-set NIC list. `nics[set]` holds (instance, [IP configuration
    address strings]) per VM; NIC bodies are built per page so a large fleet costs memory only per page.
    `loops[set]`: "self" (every nextLink is the page itself) or "ab" (page 2 links back to page 1);
    "endless" (a new skip token each page)."""

    def __init__(self, page_size: int = 100) -> None:
        super().__init__()
        self.page_size = page_size
        self.nics: dict[str, list[tuple[int, list[str]]]] = {}
        self.loops: dict[str, str] = {}
        self.lengths_lost = False
        """Answer without privateIPAddressPrefixLength whatever the api-version (a response that lost it)."""

    def answer(self, method: str, path: str, query: dict[str, str], body: Any, who: str) -> tuple[int, Any, dict[str, str]]:
        if path == "/metadata/identity/oauth2/token":
            return 200, {"access_token": "arm-token", "expires_in": "3600", "token_type": "Bearer"}, {}
        match = NIC_LIST.match(path)
        if match is None or method != "GET":
            return 404, {"error": {"code": "NotFound", "message": path}}, {}
        scale_set = match["set"].lower()
        start = int(query.get("$skiptoken") or 0)
        vms = self.nics.get(scale_set, [])
        # ARM shapes a response by the api-version asked for: below Microsoft.Network 2024-03-01 the NIC IP
        # configuration has no privateIPAddressPrefixLength (azure-rest-api-specs stable/2024-03-01/
        # networkInterface.json is the first to carry it), so a block comes back as its first address alone.
        lengths = str(query.get("api-version")) >= "2024-03-01" and not self.lengths_lost
        page = [self._nic(match["sub"], match["rg"], match["set"], i, addresses, lengths)
                for i, addresses in vms[start:start + self.page_size]]
        loop = self.loops.get(scale_set)
        base = f"{self.url}{path}?api-version={query.get('api-version')}"
        if loop == "self":
            link: str | None = f"{base}&$skiptoken={start}" if start else base
        elif loop == "ab":
            link = f"{base}&$skiptoken=1" if start == 0 else base
        elif loop == "endless":
            link = f"{base}&$skiptoken={start + 1}"
        else:
            link = f"{base}&$skiptoken={start + self.page_size}" if start + self.page_size < len(vms) else None
        return 200, {"value": page, **({"nextLink": link} if link else {})}, {}

    @staticmethod
    def _nic(sub: str, rg: str, scale_set: str, instance: int, addresses: list[str],
             lengths: bool = True) -> dict[str, Any]:
        vm = (f"/subscriptions/{sub}/resourceGroups/{rg}/providers/Microsoft.Compute/virtualMachineScaleSets/"
              f"{scale_set}/virtualMachines/{instance}")
        configs = [{"name": "node", "properties": {"privateIPAddress": f"10.255.{instance // 250}.{instance % 250 + 4}",
                                                  "primary": True}}]
        for n, address in enumerate(addresses):
            block, _, length = address.partition("/")
            configs.append({"name": f"podblock{n:02d}", "properties": {
                "privateIPAddress": block, "primary": False,
                **({"privateIPAddressPrefixLength": int(length)} if length and lengths else {})}})
        return {"name": "nic0", "id": f"{vm}/networkInterfaces/nic0",
                "properties": {"virtualMachine": {"id": vm}, "ipConfigurations": configs}}
