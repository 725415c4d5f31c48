"""`gpucluster verify` against fake ARM and Kubernetes API servers (tests/verify_fakes.py) that misbehave: answers
that prove nothing (404 everywhere), lists that never end (a nextLink to itself, a repeating continue token), a
Retry-After of 600 s, a body trickled at 2 bytes a second, a body of hundreds of MB, and links and redirects to
other hosts. Each stops at a bound of components/verify/bounds.py, with a verdict naming it, and no token leaves
for another host."""

from __future__ import annotations

import dataclasses
import threading
import time
from typing import Any

import pytest

from components.verify import bounds
from tests.test_verify import World, live, verdicts, world
from tests.verify_fakes import Answer as Special
from tests.verify_fakes import FakeApi, serve

__all__ = ["live", "world"]

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
    _limits(monkeypatch, check_seconds=1.5)
    live.arm.routes[_nic_route(live)] = Special(body=b'{"value": []}' + b" " * 200, pause=1.0)
    code, doc = _run_within(live, 60)
    [failed] = _failed(doc, "azure.nics")
    assert code == 1 and failed["subject"] == "bound: time per check" and "1.5 s" in failed["detail"]
    assert [r["check"] for r in verdicts(doc, "fail")] == ["azure.nics"]  # the checks after it ran and passed


def test_the_total_time_bound_fails_the_checks_it_left_unrun(live: World, monkeypatch: pytest.MonkeyPatch) -> None:
    _limits(monkeypatch, check_seconds=1.0, total_seconds=1.5)
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
