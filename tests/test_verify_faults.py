"""`gpucluster verify` against fake ARM and Kubernetes API servers (tests/support/verify_fakes.py) that misbehave: answers
that prove nothing (404 everywhere), lists that never end (a nextLink to itself, a repeating continue token), a
Retry-After of 600 s, a body trickled at 2 bytes a second, a body of hundreds of MB, and links and redirects to
other hosts. Each stops at a bound of components/verify/bounds.py, with a verdict naming it, and no token leaves
for another host."""

from __future__ import annotations

import dataclasses
import io
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from gpucluster.cli import main, parser
from gpucluster.verify import bounds
from gpucluster.verify.command import verify_command
from tests.support.stacks import ROOT
from tests.support.verify_fakes import Answer as Special
from tests.support.verify_fakes import FakeApi, kubeconfig, serve
from tests.support.verify_world import World, verdicts

NIC_LIST = "/virtualMachineScaleSets/h100-z1-00/networkInterfaces"


def _nic_route(w: World) -> str:
    return next(k for k in w.arm.routes if k.endswith(NIC_LIST))


def _limits(monkeypatch: pytest.MonkeyPatch, **changes: Any) -> None:
    monkeypatch.setattr(bounds, "LIMITS", dataclasses.replace(bounds.LIMITS, **changes))


def _failed(doc: dict[str, Any], check: str) -> list[dict[str, Any]]:
    return [r for r in verdicts(doc, "fail") if r["check"] == check]


def _run_within(w: World, seconds: float, *extra: str) -> tuple[int, dict[str, Any]]:
    """verify in a thread, asserted to end within `seconds` (unbounded, it would not)."""
    done: dict[str, Any] = {}
    thread = threading.Thread(target=lambda: done.update(result=w.run("--json", *extra)), daemon=True)
    started = time.monotonic()
    thread.start()
    thread.join(seconds)
    assert "result" in done, f"verify still running after {seconds} s"
    done["seconds"] = time.monotonic() - started
    return done["result"]


# Nothing found is not a pass.

def test_an_api_server_answering_404_everywhere_fails_every_cluster_check(live: World) -> None:
    live.kube.routes = {}
    code, doc = live.run("--json")
    assert code == 1
    # the certificates come from the TLS handshake (it did answer); InfiniBand and confidential nodes from the nodes
    cluster = [r for r in doc["results"] if r["check"].startswith("cluster.") and r["check"] not in (
        "cluster.certificates", "cluster.infiniband", "cluster.confidential")]
    assert not [r for r in cluster if r["status"] == "pass"], cluster
    assert {r["check"] for r in verdicts(doc, "fail")} >= {"cluster.nodes", "cluster.images", "cluster.dns",
                                                            "cluster.cni", "cluster.bootstrap-token"}
    assert any("HTTP 404: the API server does not serve this list" in r["detail"] for r in _failed(doc, "cluster.nodes"))


def test_an_empty_cluster_fails_where_the_plan_expects_nodes(live: World) -> None:
    live.kube.routes["/api/v1/nodes"]["items"] = []
    for path, route in live.kube.routes.items():
        if path.endswith("/pods"):
            route["items"] = []
    code, doc = live.run("--json")
    nodes, images = _failed(doc, "cluster.nodes"), _failed(doc, "cluster.images")
    assert code == 1
    assert any(r["subject"] == "cluster" and "no node at all" in r["detail"] for r in nodes)
    assert any(r["subject"] == "API servers" and "0 Ready node(s), the pool's minimum is 1" in r["detail"]
               for r in nodes)
    assert images and "no container at all" in images[0]["detail"]


# Bounds.

def test_a_next_link_to_itself_stops_at_the_page_bound(live: World) -> None:
    route = _nic_route(live)
    live.arm.routes[route]["nextLink"] = f"{live.arm.url}{route}?api-version=2018-10-01&$skiptoken=1"
    code, doc = _run_within(live, 60)
    [failed] = _failed(doc, "azure.nics")
    assert code == 1 and failed["subject"] == "bound: pages" and "already read" in failed["detail"]


def test_a_repeating_continue_token_stops_at_the_page_bound(live: World) -> None:
    live.kube.routes["/api/v1/nodes"]["metadata"] = {"continue": "same-token"}
    _code, doc = _run_within(live, 60)
    failed = _failed(doc, "cluster.nodes")
    assert failed and failed[0]["subject"] == "bound: pages"


def test_a_retry_after_of_600_seconds_is_capped(live: World, monkeypatch: pytest.MonkeyPatch) -> None:
    _limits(monkeypatch, retry_wait_cap=0.2)
    live.arm.routes[_nic_route(live)] = Special(429, (("Retry-After", "600"),), b'{"error": {"code": "Throttled"}}')
    live.kube.routes["/api/v1/nodes"] = Special(429, (("Retry-After", "600"),), b'{"kind": "Status", "code": 429}')
    code, doc = _run_within(live, 60)
    assert code == 1 and _failed(doc, "azure.nics") and _failed(doc, "cluster.nodes")
    assert len([p for _, p in live.arm.received if NIC_LIST in p]) == 3  # retried, each wait cut to 0.2 s


def test_a_body_trickled_at_2_bytes_a_second_stops_at_the_time_per_check(live: World,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The trickle would take 100 s; 5 s per check is many times what the healthy checks take on a loaded machine."""
    _limits(monkeypatch, check_seconds=5.0)
    live.arm.routes[_nic_route(live)] = Special(body=b'{"value": []}' + b" " * 200, pause=1.0)
    code, doc = _run_within(live, 60)
    [failed] = _failed(doc, "azure.nics")
    assert code == 1 and failed["subject"] == "bound: time per check" and "within 5 s" in failed["detail"]
    assert [r["check"] for r in verdicts(doc, "fail")] == ["azure.nics"]  # the checks after it ran and passed


def test_the_total_time_bound_fails_the_checks_it_left_unrun(live: World, monkeypatch: pytest.MonkeyPatch) -> None:
    """The checks before azure.nics have 2.5 s (they take a few hundredths), azure.nics its 3 s; what is left then is
    less than a check's time, so cluster.nodes, the next slow one, is stopped by the total."""
    _limits(monkeypatch, check_seconds=3.0, total_seconds=5.5)
    slow = Special(body=b'{"value": []}' + b" " * 200, pause=1.0)
    live.arm.routes[_nic_route(live)] = slow
    live.kube.routes["/api/v1/nodes"] = slow
    code, doc = _run_within(live, 60)
    subjects = {r["check"]: r["subject"] for r in verdicts(doc, "fail")}
    assert code == 1 and subjects["azure.nics"] == "bound: time per check"
    assert subjects["cluster.nodes"] == "bound: total time"


@pytest.mark.parametrize("declared", [True, False], ids=["content-length", "until-close"])
def test_a_huge_body_is_refused_at_the_size_bound(live: World, monkeypatch: pytest.MonkeyPatch,
                                                   declared: bool) -> None:
    _limits(monkeypatch, max_body=4 << 20)
    live.arm.routes[_nic_route(live)] = Special(size=400 << 20 if declared else 64 << 20, declared=declared)
    live.kube.routes["/api/v1/nodes"] = Special(size=400 << 20 if declared else 64 << 20, declared=declared)
    _code, doc = _run_within(live, 60)
    for check in ("azure.nics", "cluster.nodes"):
        [failed] = _failed(doc, check)
        assert failed["subject"] == "bound: body size", failed


# Same origin, https only, every hop.

def test_a_next_link_to_another_host_is_not_sent(live: World, world: World) -> None:
    other = FakeApi()
    with serve(other, world.tls, world.folder):
        route = _nic_route(live)
        live.arm.routes[route]["nextLink"] = f"{other.url}{route}?page=2"
        code, doc = live.run("--json")
        assert other.received == []
    [failed] = _failed(doc, "azure.nics")
    assert code == 1 and failed["subject"] == "bound: hosts" and "a token stays with" in failed["detail"]


def test_a_next_link_over_plain_http_is_not_sent(live: World) -> None:
    route = _nic_route(live)
    live.arm.routes[route]["nextLink"] = f"{live.arm.url.replace('https', 'http')}{route}?page=2"
    code, doc = live.run("--json")
    [failed] = _failed(doc, "azure.nics")
    # azure-core's bearer-token policy refuses a plain-http URL before the transport's own rule would
    assert code == 1 and "https" in failed["detail"] and not [p for _, p in live.arm.received if "page=2" in p]


@pytest.mark.parametrize("service", ["arm", "kube"])
def test_a_redirect_to_another_host_is_not_followed(live: World, world: World, service: str) -> None:
    other = FakeApi()
    with serve(other, world.tls, world.folder):
        if service == "arm":
            live.arm.routes[_nic_route(live)] = Special(307, (("Location", f"{other.url}/steal"),))
        else:
            live.kube.routes["/api/v1/nodes"] = Special(307, (("Location", f"{other.url}/steal"),))
        code, doc = live.run("--json")
        assert other.received == []
    assert code == 1 and _failed(doc, "azure.nics" if service == "arm" else "cluster.nodes")


# Without Azure, and interrupted.

def test_cluster_only_reads_the_kubeconfig_alone(live: World) -> None:
    def no_azure(subscription: str | None, endpoint: str | None) -> Any:
        raise AssertionError("--cluster-only asked for Azure credentials")

    args = parser().parse_args(["verify", str(live.stack), "--kubeconfig", str(live.kubeconfig), "--cluster-only",
                                "--json"])
    out = io.StringIO()
    code = verify_command(args, Console(file=out), Console(file=io.StringIO()), azure_factory=no_azure)
    doc = json.loads(out.getvalue())
    assert code == 0 and live.arm.received == [] and live.kube.received
    assert {r["check"].split(".")[0] for r in doc["results"]} == {"cluster"}
    assert doc["subscription"] == "not read (--cluster-only)"


def test_cluster_only_refuses_flags_that_read_azure(live: World, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["verify", str(live.stack), "--kubeconfig", str(live.kubeconfig), "--cluster-only",
                 "--subscription", "x"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "error: --subscription: reads Azure: drop it, or drop --cluster-only"]


def test_ctrl_c_leaves_no_key_in_tmpdir_and_says_what_happened(live: World, world: World, tmp_path: Path) -> None:
    """The client writes the kubeconfig's client-key-data to a file (ssl loads keys from files); Ctrl-C in the middle
    of a check must remove it, and the message must be about verify, not about an output folder."""
    folder = tmp_path / "kc"
    folder.mkdir()
    config = kubeconfig(folder, live.kube.url, world.tls, client=world.tls)
    live.kube.routes["/api/v1/nodes"] = Special(body=b'{"items": []}' + b" " * 100, pause=1.0)
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    env = {**os.environ, "TMPDIR": str(tmpdir), "PYTHONPATH": str(ROOT)}
    process = subprocess.Popen([sys.executable, "-m", "gpucluster.cli", "verify", str(live.stack), "--kubeconfig",
                                str(config), "--cluster-only"], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not any(p == "/api/v1/nodes" for _, p in ((m, p.split("?")[0]) for m, p in live.kube.received)):
        assert time.monotonic() < deadline and process.poll() is None, process.communicate()
        time.sleep(0.1)
    keys = [p for p in tmpdir.rglob("*") if p.is_file() and b"PRIVATE KEY" in p.read_bytes()]
    assert keys  # written while verify runs: what Ctrl-C must not leave behind
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=30)
    assert process.returncode == 130
    assert [str(p) for p in tmpdir.rglob("*")] == []
    assert err.strip().splitlines()[-1].startswith("interrupted: verify stopped before its verdicts")
