"""The prefix IPAM controller follows Nodes and CiliumNodes with watches after one paginated list (client-go's
reflector, tools/cache reflector.go ListAndWatch; kubernetes.io/docs/reference/using-api/api-concepts/
#efficient-detection-of-changes: a watch from a list's resourceVersion, bookmarks, 410 Gone when the version has
been compacted, after which a client lists again). Driven against the fake API server on 127.0.0.1
(tests/support/fake_kube.py), which serves watches as newline-delimited events ending like a watch whose timeoutSeconds ran
out."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpucluster.agents import prefix_ipam as ipam
from tests.support.fake_kube import FakeAzure, FakeKube, Fault
from tests.support.ipam_world import CILIUM, NODES, controller, pool, populate, servers

__all__ = ["servers"]


def _asked(kube: FakeKube) -> tuple[int, int]:
    """(lists, watches) of Nodes and CiliumNodes so far."""
    asked = kube.requests("GET", f"^({NODES}|{CILIUM})$")
    watches = sum(1 for r in asked if r.query.get("watch") == "1")
    return len(asked) - watches, watches


def _unfill(kube: FakeKube, name: str) -> None:
    node = kube.get_object(CILIUM, name)
    assert node is not None
    node["spec"]["ipam"]["pool"] = {}
    kube.put_object(CILIUM, node)


def test_after_one_list_each_round_watches_and_sees_what_changed(servers: tuple[FakeKube, FakeAzure],
                                                                  tmp_path: Path) -> None:
    kube, azure = servers
    desired = populate(kube, azure, {"h100-z1-00": 4}, filled=True)
    ctl = controller(kube, tmp_path)
    assert ctl.round().patched == 0 and _asked(kube) == (2, 0)
    _unfill(kube, "h100-z1-00000002")  # an agent's CiliumNode recreated empty, say
    assert ctl.round().patched == 1 and _asked(kube) == (2, 2)
    assert pool(kube, "h100-z1-00000002") == set(desired["h100-z1-00000002"])
    assert ctl.round().patched == 0 and _asked(kube) == (2, 4)  # its own patch arrived as an event, nothing to do


def test_an_expired_version_lists_again(servers: tuple[FakeKube, FakeAzure], tmp_path: Path) -> None:
    kube, azure = servers
    populate(kube, azure, {"h100-z1-00": 3}, filled=True)
    ctl = controller(kube, tmp_path)
    ctl.round()
    _unfill(kube, "h100-z1-00000001")
    kube.compacted = kube.version + 1  # etcd compacted past the version the controller holds
    assert ctl.round().patched == 1
    lists, watches = _asked(kube)
    assert lists == 4 and watches >= 1  # the 410 ERROR event, then a fresh list of each collection


def test_a_deleted_node_leaves_the_map(servers: tuple[FakeKube, FakeAzure], tmp_path: Path) -> None:
    kube, azure = servers
    populate(kube, azure, {"h100-z1-00": 3})
    ctl = controller(kube, tmp_path)
    ctl.round()
    assert "h100-z1-00000001" in ctl.nodes.items
    with kube.lock:
        kube.answer("DELETE", f"{NODES}/h100-z1-00000001", {}, None, "test")
    ctl.round()
    assert "h100-z1-00000001" not in ctl.nodes.items and len(ctl.nodes.items) == 2


def test_a_broken_watch_ends_the_round_and_the_next_resumes_without_a_list(servers: tuple[FakeKube, FakeAzure],
                                                                          tmp_path: Path) -> None:
    kube, azure = servers
    desired = populate(kube, azure, {"h100-z1-00": 3}, filled=True)
    ctl = controller(kube, tmp_path)
    ctl.round()
    _unfill(kube, "h100-z1-00000000")
    version = ctl.cilium.version
    kube.inject("GET", r"/ciliumnodes\?.*watch=1", Fault(truncate=True))
    with pytest.raises(ipam.kc.ApiError):
        ctl.round()
    assert ctl.cilium.version == version  # nothing applied from a cut stream
    for body in (b'{"type": "ADDED", "object": {"metadata": {"name": "x"', b"[1, 2]\n", b"{" * 5000 + b"\n"):
        kube.inject("GET", r"/ciliumnodes\?.*watch=1", Fault(200, body=body))
        with pytest.raises(ipam.kc.ApiError):
            ctl.round()
        assert ctl.cilium.version == version
    assert ctl.round().patched == 1 and _asked(kube)[0] == 2  # resumed from its version: no second list
    assert pool(kube, "h100-z1-00000000") == set(desired["h100-z1-00000000"])
