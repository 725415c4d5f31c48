"""Fake Kubernetes API and Azure (IMDS token, scale-set NIC lists) servers on 127.0.0.1 for the agents' fault
suites, with faults injected per request.

Kubernetes semantics followed (kubernetes.io/docs/reference/using-api/api-concepts/): lists page with `limit` and
`continue`; a PUT or a merge patch carrying a stale `metadata.resourceVersion` is 409 Conflict; a JSON patch whose
`test` op fails is 422 (k8s.io/apiserver `pkg/endpoints/handlers/patch.go` answers a failed patch application as
StatusUnprocessableEntity); POST of an existing name is 409 AlreadyExists; selectors `labelSelector=k=v` and
`fieldSelector=spec.nodeName=N`. Azure: `NetworkInterfaces_ListVirtualMachineScaleSetNetworkInterfaces` pages with
`value` and `nextLink` (azure-rest-api-specs network `examples/VmssNetworkInterfaceList.json`).
"""

from __future__ import annotations

import copy
import json
import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.support.fake_rbac import Rbac, forbidden, request_info


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


class FakeHttp:
    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.faults: list[tuple[str, re.Pattern[str], Fault]] = []
        self.seen: list[Seen] = []
        self.url = ""

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

    @contextmanager
    def running(self) -> Iterator[FakeHttp]:
        server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        server.daemon_threads = True
        self.url = f"http://127.0.0.1:{server.server_address[1]}"
        thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        thread.start()
        try:
            yield self
        finally:
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
                fake.seen.append(Seen(time.monotonic(), self.command, url.path, query, who))
            fault = fake._fault(self.command, self.path, who)
            if fault is not None and fault.delay:
                time.sleep(fault.delay)
            if fault is not None and (fault.status or fault.body is not None):
                status = fault.status or 200
                data = fault.body if fault.body is not None else json.dumps(
                    {"kind": "Status", "code": status, "message": "injected"}).encode()
                if fault.trickle:
                    self._trickle(status, data, fault.headers, fault.trickle)
                    return
                self._send(status, data, fault.headers, fault.truncate)
                return
            refused = fake.refuse(self.command, url.path, query, who)
            if refused is not None:
                self._send(refused[0], json.dumps(refused[1]).encode(), {})
                return
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                body = None
            status, payload, headers = fake.answer(self.command, url.path, query, body, who)
            data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
            self._send(status, data, headers, fault is not None and fault.truncate)

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _handle  # noqa: N815 (http.server names them)

    return Handler


def _status(code: int, reason: str, message: str) -> dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code, "reason": reason,
            "message": message}


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
            if who not in self.users:
                return 401, _status(401, "Unauthorized", "Unauthorized")
            user, groups = self.users[who]
            info = request_info(method, path, query)
            if self.rbac.allows(user, groups, info):
                return None
            self.denied.append((user, info.verb, path))
            return 403, forbidden(user, info)

    def put_object(self, collection: str, obj: dict[str, Any]) -> None:
        with self.lock:
            self.version += 1
            obj.setdefault("metadata", {})["resourceVersion"] = str(self.version)
            kind = "MODIFIED" if obj["metadata"]["name"] in self.store.get(collection, {}) else "ADDED"
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
                return 404, _status(404, "NotFound", path), {}
            collection, name = match[1], match[2]
            objects = self.store.setdefault(collection, {})
            if name is None and method == "GET" and query.get("watch") in ("1", "true"):
                return 200, self._watch(collection, query), {}
            if name is None and method == "GET":
                return 200, self._page(list(objects.values()), query), {}
            if name is None and method == "POST":
                name = body["metadata"]["name"]
                if name in objects:
                    return 409, _status(409, "AlreadyExists", f"{name} already exists"), {}
                return self._write(collection, name, body, who, 201)
            if name is None:
                return 405, _status(405, "MethodNotAllowed", method), {}
            current = objects.get(name)
            if current is None:
                return 404, _status(404, "NotFound", name), {}
            if method == "GET":
                return 200, current, {}
            if method == "DELETE":
                del objects[name]
                self.version += 1
                gone = copy.deepcopy(current)
                gone["metadata"]["resourceVersion"] = str(self.version)
                self.events.setdefault(collection, []).append((self.version, "DELETED", gone))
                return 200, _status(200, "Success", "deleted"), {}
            if self.before_write is not None:
                self.before_write(method, path, self)
                current = objects[name]
            version = current["metadata"]["resourceVersion"]
            if method == "PUT":
                if (body.get("metadata") or {}).get("resourceVersion") != version:
                    return 409, _status(409, "Conflict", "the object has been modified"), {}
                return self._write(collection, name, body, who)
            if method == "PATCH" and isinstance(body, list):
                updated = copy.deepcopy(current)
                for op in body:
                    if op["op"] == "test" and _pointer(updated, op["path"]) != op["value"]:
                        return 422, _status(422, "Invalid", f"testing value {op['path']} failed"), {}
                    if op["op"] in ("add", "replace"):
                        _set_pointer(updated, op["path"], op["value"])
                return self._write(collection, name, updated, who)
            if method == "PATCH":
                wanted = ((body or {}).get("metadata") or {}).get("resourceVersion")
                if wanted is not None and wanted != version:
                    return 409, _status(409, "Conflict", "the object has been modified"), {}
                return self._write(collection, name, merge_patch(current, body), who)
            return 405, _status(405, "MethodNotAllowed", method), {}

    def _write(self, collection: str, name: str, obj: dict[str, Any], who: str, status: int = 200
               ) -> tuple[int, Any, dict[str, str]]:
        before = self.holder()
        obj = copy.deepcopy(obj)
        obj.setdefault("metadata", {})["name"] = name
        self.put_object(collection, obj)
        now = time.monotonic()
        if collection.endswith("/leases") and self.holder() != before:
            self.lease_history.append((now, str(self.holder())))
        if collection.endswith("ciliumnodes"):
            self.cilium_writes.append((now, who, self.holder()))
        return status, obj, {}

    def _watch(self, collection: str, query: dict[str, str]) -> bytes:
        """The events after `resourceVersion`, one JSON object per line, then a bookmark at the current version; the
        watch then ends as one whose timeoutSeconds ran out. An expired version is an ERROR event with 410."""
        since = int(query.get("resourceVersion") or 0)
        if since < self.compacted:
            return (json.dumps({"type": "ERROR", "object": _status(410, "Expired", "too old resource version")})
                    + "\n").encode()
        lines = [json.dumps({"type": kind, "object": obj}) for version, kind, obj in self.events.get(collection, [])
                 if version > since]
        lines.append(json.dumps({"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": str(self.version)}}}))
        return "".join(f"{line}\n" for line in lines).encode()

    def _page(self, items: list[dict[str, Any]], query: dict[str, str]) -> dict[str, Any]:
        label = query.get("labelSelector")
        if label:
            key, _, value = label.partition("=")
            items = [o for o in items if (o["metadata"].get("labels") or {}).get(key) == value]
        fields = query.get("fieldSelector")
        if fields:
            key, _, value = fields.partition("=")
            assert key == "spec.nodeName", fields
            items = [o for o in items if (o.get("spec") or {}).get("nodeName") == value]
        start = int(query.get("continue") or 0)
        limit = int(query.get("limit") or 0) or len(items) or 1
        page = items[start:start + limit]
        more = start + limit < len(items)
        return {"kind": "List", "metadata": {"resourceVersion": str(self.version),
                                             **({"continue": str(start + limit)} if more else {})},
                "items": page}

    def _list_pods(self, query: dict[str, str]) -> dict[str, Any]:
        fields = query.get("fieldSelector") or ""
        if fields.startswith("spec.nodeName="):
            keys = sorted(self.pods_by_node.get(fields.partition("=")[2], set()))
            items = [self.store[c][n] for c, n in keys if n in self.store.get(c, {})]
        else:
            items = [o for c, objs in self.store.items() if c.endswith("/pods") for o in objs.values()]
        return self._page(items, {k: v for k, v in query.items() if k != "fieldSelector"})


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
