"""A fake Azure Resource Manager for scale sets on 127.0.0.1, over HTTPS with a self-signed certificate (azure-core's
bearer-token policy refuses plain http), recording every request.

It answers as ARM documents Microsoft.Compute does (azure-rest-api-specs Compute/stable/2026-07-02/ComputeRP.json,
VirtualMachineScaleSets_CreateOrUpdate / _Update / _Delete / _Get; ARM's async-operation guidelines,
azure-resource-manager-rpc async-api-reference.md):
- PUT: 201 with `Azure-AsyncOperation`; the operation reports InProgress, then Succeeded; `If-None-Match: *` on an
  existing scale set is 412;
- PATCH: 200 with `Azure-AsyncOperation`; the body is merged into the stored one (objects merge, lists replace);
- DELETE: 202 with `Location`, which answers 202 until the scale set is gone, then 200;
- GET: the stored scale set with provisioningState, or 404 ResourceNotFound;
- `throttle(n)`: the next n requests get 429 with `Retry-After: 1`.
The autoscaler's resize is `set_capacity` (what cluster-autoscaler's {name, sku, location} PUT leaves behind).
"""

from __future__ import annotations

import copy
import datetime
import ipaddress
import json
import ssl
import threading
from collections.abc import Iterator
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

POLLS_IN_PROGRESS = 1
"""How many polls of an operation answer InProgress before it completes."""


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    api_version: str | None
    headers: dict[str, str]
    body: Any


@dataclass
class FakeArm:
    base_url: str = ""
    ca_file: str = ""
    requests: list[Request] = field(default_factory=list)
    scale_sets: dict[str, dict[str, Any]] = field(default_factory=dict)
    """lower-cased resource path -> stored wire body."""
    operations: dict[str, dict[str, Any]] = field(default_factory=dict)
    throttled: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def throttle(self, count: int) -> None:
        with self.lock:
            self.throttled = count

    def set_capacity(self, path: str, capacity: int) -> None:
        with self.lock:
            self.scale_sets[path.lower()]["sku"]["capacity"] = capacity

    def stored(self, path: str) -> dict[str, Any] | None:
        with self.lock:
            found = self.scale_sets.get(path.lower())
            return copy.deepcopy(found) if found is not None else None

    def calls(self, method: str) -> list[Request]:
        return [r for r in self.requests if r.method == method and "/operations/" not in r.path
                and "/operationResults/" not in r.path]


def _merge(stored: Any, patch: Any) -> Any:
    if isinstance(stored, dict) and isinstance(patch, dict):
        return {**stored, **{k: _merge(stored.get(k), v) for k, v in patch.items()}}
    return copy.deepcopy(patch)


def _answer(stored: dict[str, Any]) -> dict[str, Any]:
    """What ARM returns of a scale set: never its customData (write-only)."""
    body = copy.deepcopy(stored)
    os_profile = body.get("properties", {}).get("virtualMachineProfile", {}).get("osProfile", {})
    os_profile.pop("customData", None)
    return body


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
                self._route(url.path, api_version, body)

        def _operation(self, key: str, kind: str, path: str) -> str:
            arm.operations[key] = {"kind": kind, "path": path, "polls": 0}
            segment = "operations" if kind != "delete" else "operationResults"
            return f"{arm.base_url}/subscriptions/s/providers/Microsoft.Compute/locations/eastus2/{segment}/{key}"

        def _route(self, path: str, api_version: str | None, body: Any) -> None:
            if "/operations/" in path or "/operationResults/" in path:
                self._poll(path.rsplit("/", 1)[-1])
                return
            key = path.lower()
            stored = arm.scale_sets.get(key)
            if self.command == "GET":
                if stored is None:
                    self._reply(404, {"error": {"code": "ResourceNotFound", "message": f"{path} not found"}})
                else:
                    self._reply(200, _answer(stored))
            elif self.command == "PUT":
                if stored is not None and self.headers.get("If-None-Match") == "*":
                    self._reply(412, {"error": {"code": "PreconditionFailed", "message": "the scale set exists"}})
                    return
                arm.scale_sets[key] = {**copy.deepcopy(body), "id": path, "name": path.rsplit("/", 1)[-1],
                                       "type": "Microsoft.Compute/virtualMachineScaleSets"}
                arm.scale_sets[key].setdefault("properties", {})["provisioningState"] = "Creating"
                op = self._operation(f"op{len(arm.operations)}", "put", key)
                self._reply(201, _answer(arm.scale_sets[key]), {"Azure-AsyncOperation": f"{op}?api-version={api_version}"})
            elif self.command == "PATCH":
                if stored is None:
                    self._reply(404, {"error": {"code": "ResourceNotFound", "message": f"{path} not found"}})
                    return
                arm.scale_sets[key] = _merge(stored, body)
                arm.scale_sets[key]["properties"]["provisioningState"] = "Updating"
                op = self._operation(f"op{len(arm.operations)}", "patch", key)
                self._reply(200, _answer(arm.scale_sets[key]), {"Azure-AsyncOperation": f"{op}?api-version={api_version}"})
            elif self.command == "DELETE":
                if stored is None:
                    self._reply(204)
                    return
                op = self._operation(f"op{len(arm.operations)}", "delete", key)
                self._reply(202, None, {"Location": f"{op}?api-version={api_version}"})

        def _poll(self, key: str) -> None:
            operation = arm.operations[key]
            operation["polls"] += 1
            done = operation["polls"] > POLLS_IN_PROGRESS
            if operation["kind"] == "delete":
                if done:
                    arm.scale_sets.pop(operation["path"], None)
                self._reply(200 if done else 202, None, {} if done else {"Location": arm.base_url + self.path})
                return
            if done:
                arm.scale_sets[operation["path"]]["properties"]["provisioningState"] = "Succeeded"
            self._reply(200, {"status": "Succeeded" if done else "InProgress"})

        do_GET = do_PUT = do_PATCH = do_DELETE = _handle  # noqa: N815 - http.server's method names

    return Handler


@contextmanager
def fake_arm(folder: Path) -> Iterator[FakeArm]:
    """A running fake ARM on 127.0.0.1 (an ephemeral port), stopped on exit."""
    cert_file, key_file = _certificate(folder)
    arm = FakeArm(ca_file=str(cert_file))
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(arm))
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
