"""Fake ARM and Kubernetes API servers on 127.0.0.1 for `gpucluster verify`, and the live state a deployed stack
would show them, built from its plan.

Both servers speak HTTPS with a self-signed certificate (azure-core's bearer-token policy refuses plain http). Each
answers a GET from a table of path -> JSON (a missing path is a 404 in the service's error shape) and records every
request it receives, method and path, so a test can assert that nothing but reads arrived.
"""

from __future__ import annotations

import base64
import datetime
import http.server
import ipaddress
import json
import ssl
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from gpucluster.catalog.in_cluster import PAUSE_IMAGE
from gpucluster.kubernetes.objects import dns
from gpucluster.kubernetes.objects import prefix_ipam as prefix_ipam_objects
from gpucluster.planning.azure_names import resource_group_name
from gpucluster.planning.cluster_plan import ClusterPlan
from gpucluster.planning.node_images import gallery_name
from gpucluster.planning.node_template import node_labels
from gpucluster.planning.pod_addresses import PREFIX_LENGTH, node_addressing
from gpucluster.planning.subnets import plan_vnet
from gpucluster.verify import expected
from gpucluster.verify.check_addons import NAMESPACES
from gpucluster.verify.check_nodes import RDMA_LABELS

SUBSCRIPTION = "00000000-1111-2222-3333-444444444444"
NOW = datetime.datetime.now(datetime.UTC)


@dataclass(frozen=True)
class Tls:
    cert_pem: bytes
    key_pem: bytes

    def write(self, folder: Path, name: str) -> tuple[Path, Path]:
        cert, key = folder / f"{name}.crt", folder / f"{name}.key"
        cert.write_bytes(self.cert_pem)
        key.write_bytes(self.key_pem)
        return cert, key


def self_signed(days: float = 365) -> Tls:
    """A certificate for 127.0.0.1 that is its own CA (the clients trust it as their CA file)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    start = NOW - datetime.timedelta(days=1)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(start)
            .not_valid_after(NOW + datetime.timedelta(days=days))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                           critical=False)
            .sign(key, hashes.SHA256()))
    return Tls(cert.public_bytes(serialization.Encoding.PEM),
               key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                 serialization.NoEncryption()))


@dataclass
class FakeApi:
    """The table a server answers from and what it received."""

    routes: dict[str, Any] = field(default_factory=dict)
    """Path (no query) -> JSON body, text, or (status, body); a key `METHOD path` answers that method only, and a
    path ending in `/*` answers every path under it."""
    received: list[tuple[str, str]] = field(default_factory=list)
    not_found: dict[str, Any] = field(default_factory=dict)
    url: str = ""


@dataclass(frozen=True)
class Answer:
    """A route's answer beyond a JSON body: a status with headers (a redirect, a Retry-After), a body trickled a few
    bytes at a time (`pause` seconds between writes), or `size` bytes of a body that is never held in memory, its
    length declared or not (then the connection closes at its end)."""

    status: int = 200
    headers: tuple[tuple[str, str], ...] = ()
    body: bytes = b"{}"
    pause: float = 0.0
    size: int = 0
    declared: bool = True


class _Handler(http.server.BaseHTTPRequestHandler):
    api: FakeApi
    protocol_version = "HTTP/1.1"  # keep-alive, as ARM and the API server: one TLS handshake per client
    disable_nagle_algorithm = True

    def _answer(self) -> None:
        self.api.received.append((self.command, self.path))
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        answer = self._route(urlsplit(self.path).path)
        if isinstance(answer, Answer):
            self._special(answer)
            return
        status, body = answer if isinstance(answer, tuple) else (200, answer) if answer is not None else (
            404, self.api.not_found)
        text = isinstance(body, str)
        data = body.encode() if text else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/plain" if text else "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _special(self, answer: Answer) -> None:
        self.send_response(answer.status)
        for key, value in answer.headers:
            self.send_header(key, value)
        self.send_header("Content-Type", "application/json")
        if answer.size and not answer.declared:
            self.send_header("Connection", "close")
            self.close_connection = True
        else:
            self.send_header("Content-Length", str(answer.size or len(answer.body)))
        self.end_headers()
        try:
            if answer.size:
                chunk = b" " * (1 << 20)
                for start in range(0, answer.size, len(chunk)):
                    self.wfile.write(chunk[: answer.size - start])
                return
            for start in range(0, len(answer.body), 2 if answer.pause else len(answer.body) or 1):
                self.wfile.write(answer.body[start:start + 2] if answer.pause else answer.body)
                self.wfile.flush()
                time.sleep(answer.pause)
        except OSError:  # the client gave up (a bound under test)
            self.close_connection = True

    def _route(self, path: str) -> Any:
        routes = self.api.routes
        for key in (f"{self.command} {path}", *([path] if self.command in ("GET", "HEAD") else [])):
            if key in routes:
                return routes[key]
        for key, value in routes.items():
            method, _, prefix = key.rpartition(" ")
            reads = not method and self.command in ("GET", "HEAD")
            if prefix.endswith("/*") and path.startswith(prefix[:-1]) and (reads or method == self.command):
                return value
        return None

    def do_GET(self) -> None:
        self._answer()

    def do_HEAD(self) -> None:
        self._answer()

    def do_POST(self) -> None:
        self._answer()

    def do_PUT(self) -> None:
        self._answer()

    def do_PATCH(self) -> None:
        self._answer()

    def do_DELETE(self) -> None:
        self._answer()

    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextmanager
def serve(api: FakeApi, tls: Tls, folder: Path) -> Iterator[FakeApi]:
    handler = type("Handler", (_Handler,), {"api": api})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    cert, key = tls.write(folder, f"server-{id(api)}")
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    api.url = f"https://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield api
    finally:
        server.shutdown()
        server.server_close()


def kubeconfig(folder: Path, server: str, ca: Tls, client: Tls | None = None) -> Path:
    """A kubeconfig for the fake API server: its CA, a bearer token, and a client certificate when given."""
    user: dict[str, Any] = {"token": "fixture-token"}
    if client is not None:
        user = {"client-certificate-data": base64.b64encode(client.cert_pem).decode(),
                "client-key-data": base64.b64encode(client.key_pem).decode()}
    doc = {"apiVersion": "v1", "kind": "Config", "current-context": "fixture",
           "clusters": [{"name": "fixture", "cluster": {
               "server": server, "certificate-authority-data": base64.b64encode(ca.cert_pem).decode()}}],
           "users": [{"name": "fixture", "user": user}],
           "contexts": [{"name": "fixture", "context": {"cluster": "fixture", "user": "fixture"}}]}
    path = folder / "kubeconfig"
    path.write_text(json.dumps(doc))
    return path


# The live state of a deployed stack, as ARM and the API server would show it.

def _vm_id(rg: str, scale_set: str, instance: int) -> str:
    return (f"/subscriptions/{SUBSCRIPTION}/resourceGroups/{rg}/providers/Microsoft.Compute/virtualMachineScaleSets/"
            f"{scale_set}/virtualMachines/{instance}")


def arm_routes(plan: ClusterPlan) -> dict[str, Any]:
    sub, rg, loc = f"/subscriptions/{SUBSCRIPTION}", resource_group_name(plan.spec.name), plan.spec.location
    compute = f"{sub}/resourceGroups/{rg}/providers/Microsoft.Compute"
    routes: dict[str, Any] = {f"{sub}/providers/{ns}": {"namespace": ns, "registrationState": "Registered"}
                              for ns in expected.providers(plan)}
    feature = plan.spec.network.prefix_on_nic_onboarding or ""
    if "/" in feature:
        namespace, name = feature.split("/")
        routes[f"{sub}/providers/Microsoft.Features/providers/{namespace}/features/{name}"] = {
            "name": feature, "properties": {"state": "Registered"}, "type": "Microsoft.Features/providers/features"}
    sizes = sorted({p.size for p in expected.placements(plan)})
    routes[f"{sub}/providers/Microsoft.Compute/skus"] = {"value": [
        {"resourceType": "virtualMachines", "name": size, "locations": [loc],
         "locationInfo": [{"location": loc, "zones": ["1", "2", "3"]}], "restrictions": []} for size in sizes]}
    usage = [(q.family, q.vcpus) for q in plan.quota] + [("virtualMachineScaleSets", 50)]
    routes[f"{sub}/providers/Microsoft.Compute/locations/{loc}/usages"] = {"value": [
        {"name": {"value": name, "localizedValue": name}, "currentValue": 0, "limit": need * 2, "unit": "Count"}
        for name, need in usage]}
    for pool, scale_set in expected.scale_sets(plan):
        routes[f"{compute}/virtualMachineScaleSets/{scale_set.name}"] = _scale_set(
            scale_set.name, pool.size.name, [scale_set.zone], scale_set.single_placement_group,
            scale_set.platform_fault_domain_count, expected.machine_image_id(plan, SUBSCRIPTION, scale_set.name), loc)
        routes[f"{compute}/virtualMachineScaleSets/{scale_set.name}/virtualMachines"] = {"value": [
            {"name": f"{scale_set.name}_{i}", "instanceId": str(i), "properties": {"latestModelApplied": True}}
            for i in range(scale_set.capacity)]}
        if node_addressing(pool.spec).prefix_mode:
            routes[f"{compute}/virtualMachineScaleSets/{scale_set.name}/networkInterfaces"] = {
                "value": [_nic(rg, scale_set.name, i, plan, pool.name, node_addressing(pool.spec).blocks)
                          for i in range(scale_set.capacity)]}
    routes.update(subnet_routes(plan))
    cp = plan.control_plane
    routes[f"{compute}/virtualMachineScaleSets/{expected.API_SCALE_SET}"] = _scale_set(
        expected.API_SCALE_SET, cp.api.size.name, list(cp.api.zones), False, 1,
        expected.machine_image_id(plan, SUBSCRIPTION, expected.API_SCALE_SET), loc)
    for version in plan.images.versions:
        image = version.image
        routes[f"{compute}/galleries/{gallery_name(plan.spec.name)}/images/{image.definition}/versions/{image.version}"] = (
            image_version(image.version, DISPLAY_NAMES[loc], version.replicas))
    acr = f"{sub}/resourceGroups/{rg}/providers/Microsoft.ContainerRegistry/registries/{plan.registry.name}"
    routes[acr] = {"name": plan.registry.name, "location": loc, "sku": {"name": "Premium"},
                   "properties": {"loginServer": plan.registry.login_server, "provisioningState": "Succeeded"}}
    routes[f"{acr}/cacheRules"] = {"value": [
        {"name": r.name, "properties": {
            "sourceRepository": r.source_repository, "targetRepository": r.target_repository,
            "provisioningState": "Succeeded",
            **({"credentialSetResourceId": f"{acr}/credentialSets/{r.credential_set}"} if r.credential_set else {})}}
        for r in plan.registry.cache_rules]}
    routes[f"{acr}/credentialSets/docker-hub"] = {"name": "docker-hub", "properties": {
        "loginServer": "docker.io", "provisioningState": "Succeeded",
        "authCredentials": [{"name": "Credential1", "credentialHealth": {"status": "Healthy"}}]}}
    return routes


def subnet_routes(plan: ClusterPlan) -> dict[str, Any]:
    """Each subnet the stack creates, at its planned prefix, as Subnets_Get returns it, where the plan puts it
    (components/planning/subnets.py)."""
    place = plan_vnet(plan.spec, plan.ip)
    vnet = place.id(SUBSCRIPTION)
    return {f"{vnet}/subnets/{s.name}": {"name": s.name, "id": f"{vnet}/subnets/{s.name}",
                                         "properties": {"addressPrefix": str(s.cidr), "provisioningState": "Succeeded"}}
            for s in place.created}


DISPLAY_NAMES = {"eastus2": "East US 2"}
"""Gallery image versions name regions by display name (azure-rest-api-specs specification/compute/resource-manager/
Microsoft.Compute/GalleryRP/stable/2024-03-03/examples/galleryExamples/GalleryImageVersion_Get_WithReplicationStatus.json)."""


def image_version(version: str, region: str, replicas: int) -> dict[str, Any]:
    """A built gallery image version, replicated to `region`, as Get with $expand=ReplicationStatus returns it."""
    return {"name": version, "location": region, "properties": {
        "provisioningState": "Succeeded",
        "publishingProfile": {"targetRegions": [
            {"name": region, "regionalReplicaCount": replicas, "storageAccountType": "Standard_ZRS"}]},
        "replicationStatus": {"aggregatedState": "Completed",
                              "summary": [{"region": region, "state": "Completed", "progress": 100}]}}}


def _scale_set(name: str, size: str, zones: list[str], single: bool, fault_domains: int, image_id: str,
               location: str) -> dict[str, Any]:
    return {"name": name, "location": location, "zones": zones, "sku": {"name": size, "tier": "Standard", "capacity": 1},
            "properties": {"singlePlacementGroup": single, "platformFaultDomainCount": fault_domains,
                           "orchestrationMode": "Uniform", "overprovision": False, "provisioningState": "Succeeded",
                           "virtualMachineProfile": {"storageProfile": {"imageReference": {"id": image_id}}}}}


def _nic(rg: str, scale_set: str, instance: int, plan: ClusterPlan, pool: str, blocks: int) -> dict[str, Any]:
    """A scale-set NIC in the REST shape the 2024-03-01+ model documents: the primary address, then one IP
    configuration per /28 block (an address with privateIPAddressPrefixLength)."""
    subnet = plan.ip.pool_block(pool).cidr
    slots = list(subnet.subnets(new_prefix=PREFIX_LENGTH))
    vm = _vm_id(rg, scale_set, instance)
    configs = [{"name": "node", "properties": {"primary": True, "privateIPAddress": str(slots[0][4 + instance])}}]
    configs += [{"name": f"podblock{b + 1:02d}", "properties": {
        "primary": False, "privateIPAddress": str(slots[1 + instance * blocks + b].network_address),
        "privateIPAddressPrefixLength": PREFIX_LENGTH}} for b in range(blocks)]
    return {"id": f"{vm}/networkInterfaces/nic0", "name": "nic0",
            "properties": {"virtualMachine": {"id": vm}, "ipConfigurations": configs}}


def _node(name: str, provider_id: str, labels: dict[str, str], kernel: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels}, "spec": {"providerID": provider_id},
            "status": {"conditions": [{"type": "Ready", "status": "True"}], "nodeInfo": {"kernelVersion": kernel}}}


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def kube_routes(plan: ClusterPlan, token_days: float = 60) -> dict[str, Any]:
    rg, loc = resource_group_name(plan.spec.name), plan.spec.location
    nodes = []
    for pool, scale_set in expected.scale_sets(plan):
        labels = node_labels(pool, scale_set, loc)
        if scale_set.infiniband:
            labels.update(dict.fromkeys(RDMA_LABELS, "true"))
        kernel = "6.8.0-1025-azure-fde" if pool.confidential is not None else "6.8.0-1025-azure"
        nodes += [_node(f"{scale_set.name}{i:06d}", "azure://" + _vm_id(rg, scale_set.name, i), labels, kernel)
                  for i in range(scale_set.capacity)]
    nodes += [_node(f"{expected.API_SCALE_SET}{i:06d}", "azure://" + _vm_id(rg, expected.API_SCALE_SET, i),
                    {"node-role.kubernetes.io/control-plane": ""}, "6.8.0-1025-azure")
              for i in range(plan.control_plane.api.count)]
    cilium_nodes = [{"metadata": {"name": n["metadata"]["name"]}, "spec": {"ipam": {"pool": {"10.80.9.1": {}}}}}
                    for n in nodes]
    expires = (NOW + datetime.timedelta(days=token_days)).strftime("%Y-%m-%dT%H:%M:%SZ")
    token = {"metadata": {"name": "bootstrap-token-abcdef", "namespace": "kube-system"},
             "type": "bootstrap.kubernetes.io/token",
             "data": {"token-id": _b64("abcdef"), "expiration": _b64(expires),
                      "usage-bootstrap-authentication": _b64("true"), "usage-bootstrap-signing": _b64("true")}}
    apps, core = "/apis/apps/v1/namespaces/kube-system", "/api/v1/namespaces/kube-system"
    deployments = [dns.APP, "cilium-operator"] + ([prefix_ipam_objects.APP] if plan.prefix_mode else [])
    routes: dict[str, Any] = {
        "/api/v1/nodes": {"kind": "NodeList", "metadata": {}, "items": nodes},
        "/apis/cilium.io/v2/ciliumnodes": {"kind": "CiliumNodeList", "metadata": {}, "items": cilium_nodes},
        f"{core}/secrets": {"kind": "SecretList", "metadata": {}, "items": [token]},
        f"{apps}/daemonsets/cilium": {"metadata": {"name": "cilium"}, "status": {
            "desiredNumberScheduled": len(nodes), "numberReady": len(nodes)}},
        f"{core}/services/kube-dns": {"metadata": {"name": "kube-dns"}, "spec": {"clusterIP": str(plan.ip.dns_service_ip)}},
        "/apis/discovery.k8s.io/v1/namespaces/kube-system/endpointslices": {"metadata": {}, "items": [
            {"metadata": {"name": "kube-dns-x"}, "endpoints": [
                {"addresses": ["10.80.9.2"], "conditions": {"ready": True}}]}]},
    }
    for name in deployments:
        routes[f"{apps}/deployments/{name}"] = {"metadata": {"name": name}, "spec": {"replicas": 2},
                                                "status": {"availableReplicas": 2}}
    image = plan.registry.serve(PAUSE_IMAGE)
    for namespace in NAMESPACES:
        routes[f"/api/v1/namespaces/{namespace}/pods"] = {"metadata": {}, "items": [
            {"metadata": {"name": "agent", "namespace": namespace},
             "spec": {"containers": [{"name": "main", "image": image}]},
             "status": {"containerStatuses": [{"name": "main", "image": image, "state": {"running": {}}}]}}]}
    routes["/api/v1/namespaces/kube-system/configmaps/gpucluster-rollout-state"] = {
        "metadata": {"name": "gpucluster-rollout-state"},
        "data": {"state.json": json.dumps({"wave": 5, "phase": "drain", "deadline": 1_796_000_000.0,
                                           "behind": {"system-z1-00": ["0", "1"]},
                                           "current": {"index": 5, "pool": "system", "scaleSets": ["system-z1-00"],
                                                       "topology": False, "preflight": False, "drainMinutes": 0,
                                                       "minutes": 25}})}}
    return routes
