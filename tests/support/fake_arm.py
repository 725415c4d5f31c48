"""A fake Azure Resource Manager for Microsoft.Compute on 127.0.0.1, over HTTPS with a self-signed certificate
(azure-core's bearer-token policy refuses plain http), recording every request.

It serves the resource types our dynamic providers manage (scale sets and interconnect blocks) as ARM documents
Microsoft.Compute does (azure-rest-api-specs Compute/stable/2026-07-02/ComputeRP.json, *_CreateOrUpdate / _Update /
_Delete / _Get; ARM's async-operation guidelines, azure-resource-manager-rpc async-api-reference.md):
- PUT: 201 with `Azure-AsyncOperation`; the operation reports InProgress, then Succeeded (or Failed, with the
  resource left behind in provisioningState Failed: `fail_next_create`). An operation runs on its own, as ARM's do:
  once `operation_seconds` have passed, a GET of the resource shows where it ended whether or not anyone polled.
  `If-None-Match: *` on an existing resource and an `If-Match` etag that is not the current one are 412; a PUT on
  an existing resource merges into it (what cluster-autoscaler's sparse {name, sku, location} capacity PUT relies
  on);
- PATCH: 200 with `Azure-AsyncOperation`; the body is merged into the stored one (objects merge, lists replace);
- DELETE: 202 with `Location`, which answers 202 until the resource is gone, then 200;
- GET: the stored resource with provisioningState and etag, or 404 ResourceNotFound;
- `throttle(n)`: the next n requests get 429 with `Retry-After: 1`;
- `operation_seconds`: how long a long-running operation stays InProgress (0: one poll);
- `retry_after`: the `Retry-After` (seconds) an InProgress operation answers with, as ARM's do (none by default).

Authorization: a bearer token named in `identities` is an add-on identity holding those grants (action, scope);
any other token is the deployer, allowed everything. A request needs its RBAC action at a scope that contains its
path (components/catalog/arm_operations.py `rbac_action`), and a write to a scale set or one of its VMs passes
ARM's linked access check: every resource the resulting model references needs its own action, at a scope that
contains that resource (error `LinkedAuthorizationFailed`): the gallery image version it boots
(`Microsoft.Compute/galleries/images/versions/read`: ARM names it as the linked action of a scale-set CreateOrUpdate
in Azure/aad-pod-identity#752 and of a scale-set VM update in Azure/azure-cli#15594), the subnets of its IP
configurations (subnets/join/action) and the user-assigned identities it carries (assign/action).
"""

from __future__ import annotations

import copy
import datetime
import ipaddress
import json
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from gpucluster.catalog.arm_operations import IDENTITY_ASSIGN, SUBNET_JOIN, rbac_action

POLLS_IN_PROGRESS = 1
"""How many polls of an operation answer InProgress before it completes."""

SERVED_TYPES = {"virtualmachinescalesets": "Microsoft.Compute/virtualMachineScaleSets",
                "interconnectblocks": "Microsoft.Compute/interconnectBlocks"}
GALLERY_IMAGE_READ = "Microsoft.Compute/galleries/images/versions/read"


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    api_version: str | None
    headers: dict[str, str]
    body: Any


@dataclass(frozen=True)
class Grant:
    action: str
    scope: str
    """A resource id prefix: a subscription, a resource group, a gallery."""


@dataclass
class FakeArm:
    base_url: str = ""
    ca_file: str = ""
    requests: list[Request] = field(default_factory=list)
    resources: dict[str, dict[str, Any]] = field(default_factory=dict)
    """lower-cased resource path -> stored wire body."""
    operations: dict[str, dict[str, Any]] = field(default_factory=dict)
    identities: dict[str, list[Grant]] = field(default_factory=dict)
    """bearer token -> what that identity was granted; other tokens are the deployer."""
    throttled: int = 0
    failing_creates: list[str] = field(default_factory=list)
    """Error codes the next creates' long-running operations end with (AllocationFailed, ...)."""
    operation_seconds: float = 0.0
    retry_after: int | None = None
    clock: Callable[[], float] = time.monotonic
    """What `operation_seconds` are measured on: a test that sleeps on a clock of its own puts that clock here."""
    lock: threading.Lock = field(default_factory=threading.Lock)

    def throttle(self, count: int) -> None:
        with self.lock:
            self.throttled = count

    def fail_next_create(self, code: str = "AllocationFailed") -> None:
        with self.lock:
            self.failing_creates.append(code)

    def set_capacity(self, path: str, capacity: int) -> None:
        with self.lock:
            self.resources[path.lower()]["sku"]["capacity"] = capacity

    def edit(self, path: str, change: Any) -> None:
        """An out-of-band change (the portal, the CLI): `change` is called with the stored wire body."""
        with self.lock:
            change(self.resources[path.lower()])
            self.resources[path.lower()]["etag"] = f'"{time.monotonic_ns()}"'

    def add_instances(self, scale_set: str, count: int) -> list[str]:
        """`count` VMs of a stored scale set, as its model makes them (storage, network and identity); their paths."""
        with self.lock:
            model = self.resources[scale_set.lower()]
            profile = model["properties"]["virtualMachineProfile"]
            paths = []
            for instance in range(count):
                path = f"{model['id']}/virtualMachines/{instance}"
                self.resources[path.lower()] = {
                    "id": path, "name": f"{model['name']}_{instance}", "type": SCALE_SET_VM,
                    "location": model.get("location"), "identity": copy.deepcopy(model.get("identity")),
                    "properties": {"storageProfile": copy.deepcopy(profile.get("storageProfile")),
                                   "networkProfileConfiguration": copy.deepcopy(profile.get("networkProfile")),
                                   "provisioningState": "Succeeded"},
                    "etag": f'"{time.monotonic_ns()}"'}
                paths.append(path)
            return paths

    def stored(self, path: str) -> dict[str, Any] | None:
        with self.lock:
            found = self.resources.get(path.lower())
            return copy.deepcopy(found) if found is not None else None

    def most_in_flight(self) -> int:
        """The most long-running operations that were running in ARM at one moment: each from its acceptance until
        it ended, `operation_seconds` later (whether or not anyone polled it then)."""
        with self.lock:
            spans = [(o["started"], o["started"] + self.operation_seconds) for o in self.operations.values()]
        return max((sum(1 for s, f in spans if s <= start < f) for start, _ in spans), default=0)

    def polls(self) -> list[Request]:
        """The requests that polled a long-running operation."""
        return [r for r in self.requests if "/operations/" in r.path or "/operationResults/" in r.path]

    def calls(self, method: str) -> list[Request]:
        return [r for r in self.requests if r.method == method and "/operations/" not in r.path
                and "/operationResults/" not in r.path]


def _merge(stored: Any, patch: Any) -> Any:
    if isinstance(stored, dict) and isinstance(patch, dict):
        return {**stored, **{k: _merge(stored.get(k), v) for k, v in patch.items()}}
    return copy.deepcopy(patch)


def _answer(stored: dict[str, Any]) -> dict[str, Any]:
    """What ARM returns of a resource: never a scale set's customData (write-only)."""
    body = copy.deepcopy(stored)
    os_profile = body.get("properties", {}).get("virtualMachineProfile", {}).get("osProfile", {})
    os_profile.pop("customData", None)
    return body


SCALE_SET_VM = "Microsoft.Compute/virtualMachineScaleSets/virtualMachines"


def _served_type(path: str) -> str | None:
    """The ARM type of a resource path this fake serves (its last type/name pair), else None."""
    parts = [p.lower() for p in path.strip("/").split("/")]
    if len(parts) == 10 and parts[5:8] == ["microsoft.compute", "virtualmachinescalesets", parts[7]] \
            and parts[8] == "virtualmachines":
        return SCALE_SET_VM
    if len(parts) < 8 or parts[-4] != "providers" or parts[-3] != "microsoft.compute":
        return None
    return SERVED_TYPES.get(parts[-2])


def _contains(scope: str, resource: str) -> bool:
    scope, resource = scope.lower().rstrip("/"), resource.lower()
    return resource == scope or resource.startswith(scope + "/")


def linked_checks(model: dict[str, Any]) -> list[tuple[str, str]]:
    """(action, resource id) ARM checks on the resources a scale-set model references."""
    props = model.get("properties") or {}
    # a scale set names them in its VM profile; one of its VMs in its own properties
    profile = props.get("virtualMachineProfile") or props
    network = profile.get("networkProfile") or profile.get("networkProfileConfiguration") or {}
    needed: list[tuple[str, str]] = []
    image = ((profile.get("storageProfile") or {}).get("imageReference") or {}).get("id")
    if isinstance(image, str) and "/galleries/" in image.lower():
        needed.append((GALLERY_IMAGE_READ, image))
    for nic in network.get("networkInterfaceConfigurations") or []:
        for config in (nic.get("properties") or {}).get("ipConfigurations") or []:
            subnet = ((config.get("properties") or {}).get("subnet") or {}).get("id")
            if isinstance(subnet, str):
                needed.append((SUBNET_JOIN, subnet))
    for identity in ((model.get("identity") or {}).get("userAssignedIdentities") or {}):
        needed.append((IDENTITY_ASSIGN, identity))
    return sorted(set(needed))


def _certificate(folder: Path) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "fake-arm")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(hours=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
            .sign(key, hashes.SHA256()))
    cert_file, key_file = folder / "arm.pem", folder / "arm.key"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_file, key_file


def _finish(arm: FakeArm, operation: dict[str, Any]) -> None:
    """A write's operation ends: its resource's provisioningState says how (called under the lock)."""
    if "finished" in operation:
        return
    operation["finished"] = arm.clock()
    stored = arm.resources.get(operation["path"])
    if stored is not None:
        stored["properties"]["provisioningState"] = "Failed" if operation["failure"] else "Succeeded"


def _settle(arm: FakeArm, key: str) -> None:
    """Ends the writes on `key` whose time has come, polled or not (called under the lock)."""
    for operation in arm.operations.values():
        if operation["path"] == key and operation["kind"] != "delete" \
                and arm.clock() - operation["started"] >= arm.operation_seconds:
            _finish(arm, operation)


def _handler(arm: FakeArm) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            return

        def _reply(self, status: int, body: Any = None, headers: dict[str, str] | None = None) -> None:
            data = json.dumps(body).encode() if body is not None else b""
            self.send_response(status)
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _error(self, status: int, code: str, message: str) -> None:
            self._reply(status, {"error": {"code": code, "message": message}})

        def _handle(self) -> None:
            url = urlsplit(self.path)
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            body = json.loads(raw) if raw else None
            api_version = (parse_qs(url.query).get("api-version") or [None])[0]
            with arm.lock:
                arm.requests.append(Request(self.command, url.path, api_version,
                                            {k.lower(): v for k, v in self.headers.items()}, body))
                if arm.throttled:
                    arm.throttled -= 1
                    self._reply(429, {"error": {"code": "TooManyRequests", "message": "throttled"}},
                                {"Retry-After": "1"})
                    return
            if "/operations/" in url.path or "/operationResults/" in url.path:
                self._poll(url.path.rsplit("/", 1)[-1])
                return
            with arm.lock:
                self._route(url.path, api_version, body)

        def _grants(self) -> list[Grant] | None:
            token = (self.headers.get("Authorization") or "").removeprefix("Bearer ")
            return arm.identities.get(token)

        def _denied(self, path: str, model: dict[str, Any] | None) -> bool:
            """Answers 403 and returns True when the caller's grants do not cover the request."""
            grants = self._grants()
            if grants is None:
                return False
            action = rbac_action(self.command, path)
            if not any(g.action == action and _contains(g.scope, path) for g in grants):
                self._error(403, "AuthorizationFailed", f"does not have authorization to perform action "
                                                        f"'{action}' over scope '{path}'")
                return True
            if model is None or self.command not in ("PUT", "PATCH"):
                return False
            for linked, resource in linked_checks(model):
                if not any(g.action == linked and _contains(g.scope, resource) for g in grants):
                    self._error(403, "LinkedAuthorizationFailed",
                                f"has permission to perform action '{action}' on scope '{path}'; however, it does "
                                f"not have permission to perform action(s) '{linked}' on the linked scope(s) "
                                f"'{resource}'")
                    return True
            return False

        def _operation(self, kind: str, path: str, failure: str | None = None) -> str:
            key = f"op{len(arm.operations)}"
            arm.operations[key] = {"kind": kind, "path": path, "polls": 0, "failure": failure,
                                   "started": arm.clock()}
            segment = "operations" if kind != "delete" else "operationResults"
            return f"{arm.base_url}/subscriptions/s/providers/Microsoft.Compute/locations/eastus2/{segment}/{key}"

        def _route(self, path: str, api_version: str | None, body: Any) -> None:
            arm_type = _served_type(path)
            if arm_type is None:
                self._error(400, "InvalidResourceType", f"{path}: not a resource this fake serves")
                return
            key = path.lower()
            if self.command == "GET":
                _settle(arm, key)
            stored = arm.resources.get(key)
            if self.command == "GET":
                if self._denied(path, None):
                    return
                if stored is None:
                    self._error(404, "ResourceNotFound", f"{path} not found")
                else:
                    self._reply(200, _answer(stored))
            elif self.command == "PUT":
                merged = _merge(stored, body) if stored is not None else copy.deepcopy(body)
                if self._denied(path, merged if arm_type != "Microsoft.Compute/interconnectBlocks" else None):
                    return
                if stored is not None and self.headers.get("If-None-Match") == "*":
                    self._error(412, "PreconditionFailed", "the resource exists")
                    return
                if_match = self.headers.get("If-Match")
                if if_match is not None and (stored is None or if_match not in ("*", stored.get("etag"))):
                    self._error(412, "PreconditionFailed", "the etag does not match")
                    return
                failure = arm.failing_creates.pop(0) if stored is None and arm.failing_creates else None
                arm.resources[key] = {**merged, "id": path, "name": path.rsplit("/", 1)[-1], "type": arm_type,
                                      "etag": f'"{time.monotonic_ns()}"'}
                arm.resources[key].setdefault("properties", {})["provisioningState"] = \
                    "Creating" if stored is None else "Updating"
                op = self._operation("put", key, failure)
                self._reply(201 if stored is None else 200, _answer(arm.resources[key]),
                            {"Azure-AsyncOperation": f"{op}?api-version={api_version}"})
            elif self.command == "PATCH":
                if stored is None:
                    self._error(404, "ResourceNotFound", f"{path} not found")
                    return
                merged = _merge(stored, body)
                if self._denied(path, merged if arm_type != "Microsoft.Compute/interconnectBlocks" else None):
                    return
                arm.resources[key] = {**merged, "etag": f'"{time.monotonic_ns()}"'}
                arm.resources[key]["properties"]["provisioningState"] = "Updating"
                op = self._operation("patch", key)
                self._reply(200, _answer(arm.resources[key]), {"Azure-AsyncOperation": f"{op}?api-version={api_version}"})
            elif self.command == "DELETE":
                if self._denied(path, None):
                    return
                if stored is None:
                    self._reply(204)
                    return
                op = self._operation("delete", key)
                self._reply(202, None, {"Location": f"{op}?api-version={api_version}"})

        def _poll(self, key: str) -> None:
            with arm.lock:
                operation = arm.operations[key]
                operation["polls"] += 1
                done = operation["polls"] > POLLS_IN_PROGRESS \
                    and arm.clock() - operation["started"] >= arm.operation_seconds
                if operation["kind"] == "delete":
                    if done:
                        arm.resources.pop(operation["path"], None)
                    self._reply(200 if done else 202, None, {} if done else {"Location": arm.base_url + self.path})
                    return
                if not done and "finished" not in operation:
                    self._reply(200, {"status": "InProgress"},
                                {"Retry-After": str(arm.retry_after)} if arm.retry_after is not None else None)
                    return
                _finish(arm, operation)
                failure = operation["failure"]
                if failure:
                    self._reply(200, {"status": "Failed", "error": {
                        "code": failure, "message": "Allocation failed. We do not have sufficient capacity for the "
                                                    "requested VM size in this region."}})
                else:
                    self._reply(200, {"status": "Succeeded"})

        do_GET = do_PUT = do_PATCH = do_DELETE = _handle  # noqa: N815 - http.server's method names

    return Handler


@contextmanager
def fake_arm(folder: Path) -> Iterator[FakeArm]:
    """A running fake ARM on 127.0.0.1 (an ephemeral port), stopped on exit."""
    cert_file, key_file = _certificate(folder)
    arm = FakeArm(ca_file=str(cert_file))
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(arm))
    server.daemon_threads = True
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert_file, key_file)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    arm.base_url = f"https://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield arm
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


class FakeCredential:
    """A token credential (azure.core.credentials.TokenCredential protocol) handing out the deployer's token. Providers
    name it by import path (`DEPLOYER`): a credential object would be pickled into the state."""

    token = "fake-token"

    def get_token(self, *_scopes: str, **_kwargs: Any) -> Any:
        from azure.core.credentials import AccessToken

        return AccessToken(self.token, int(time.time()) + 3600)


class IdentityCredential(FakeCredential):
    def __init__(self, token: str) -> None:
        self.token = token


DEPLOYER = "tests.support.fake_arm:FakeCredential"
