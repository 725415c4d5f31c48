"""The fake API server's authorization (tests/support/fake_rbac.py) against kube-apiserver's: verbs as requestinfo.go
computes them (k8s.io/apiserver kubernetes-1.36.3 pkg/endpoints/request/requestinfo.go), RBAC rule matching as
rbac.go RuleAllows, and a role that lacks a verb the daemon uses fails the daemon's own test."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpucluster.agents import health_agent as agent
from gpucluster.agents import kube_client as kc
from gpucluster.kubernetes.objects import health
from gpucluster.kubernetes.objects import prefix_ipam as ipam_objects
from tests.support.fake_kube import FakeAzure, FakeKube
from tests.support.fake_rbac import Rbac, request_info, service_account_user
from tests.support.ipam_world import ACCOUNT, controller, populate

VERBS = [
    ("GET", "/api/v1/nodes", {}, ("list", "", "", "nodes", "", "")),
    ("GET", "/api/v1/nodes", {"watch": "1"}, ("watch", "", "", "nodes", "", "")),
    ("GET", "/api/v1/nodes", {"watch": "true"}, ("watch", "", "", "nodes", "", "")),
    ("GET", "/api/v1/nodes", {"watch": "false"}, ("list", "", "", "nodes", "", "")),
    ("GET", "/api/v1/nodes", {"fieldSelector": "metadata.name=n1"}, ("list", "", "", "nodes", "", "n1")),
    ("GET", "/api/v1/nodes/n1", {}, ("get", "", "", "nodes", "", "n1")),
    ("GET", "/api/v1/watch/nodes", {}, ("watch", "", "", "nodes", "", "")),
    ("PATCH", "/api/v1/nodes/n1/status", {}, ("patch", "", "", "nodes", "status", "n1")),
    ("POST", "/api/v1/namespaces/ns/pods/p/eviction", {}, ("create", "", "ns", "pods", "eviction", "p")),
    ("PUT", "/apis/coordination.k8s.io/v1/namespaces/ns/leases/l", {},
     ("update", "coordination.k8s.io", "ns", "leases", "", "l")),
    ("POST", "/apis/coordination.k8s.io/v1/namespaces/ns/leases", {},
     ("create", "coordination.k8s.io", "ns", "leases", "", "")),
    ("DELETE", "/api/v1/namespaces/ns/pods/p", {}, ("delete", "", "ns", "pods", "", "p")),
    ("DELETE", "/api/v1/namespaces/ns/pods", {}, ("deletecollection", "", "ns", "pods", "", "")),
    ("GET", "/api/v1/namespaces/ns", {}, ("get", "", "ns", "namespaces", "", "ns")),
    ("PUT", "/api/v1/namespaces/ns/finalize", {}, ("update", "", "ns", "namespaces", "finalize", "ns")),
    ("GET", "/apis/cilium.io/v2/ciliumnodes", {"watch": "1"}, ("watch", "cilium.io", "", "ciliumnodes", "", "")),
]


@pytest.mark.parametrize(("method", "path", "query", "expected"), VERBS, ids=[f"{m} {p} {q}" for m, p, q, _ in VERBS])
def test_the_verb_is_the_one_kube_apiserver_authorizes(method: str, path: str, query: dict[str, str],
                                                       expected: tuple[str, ...]) -> None:
    info = request_info(method, path, query)
    assert info.resource_request
    assert (info.verb, info.api_group, info.namespace, info.resource, info.subresource, info.name) == expected


def test_non_resource_paths() -> None:
    assert not request_info("GET", "/healthz", {}).resource_request
    assert not request_info("GET", "/apis/cilium.io", {}).resource_request


def test_rules_match_as_rbac_go_does() -> None:
    user, groups = service_account_user("ns", "sa")
    role = {"kind": "Role", "metadata": {"name": "r", "namespace": "ns"}, "rules": [
        {"apiGroups": [""], "resources": ["*/status"], "verbs": ["patch"]},
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "resourceNames": ["mine"], "verbs": ["*"]}]}
    binding = {"kind": "RoleBinding", "metadata": {"name": "r", "namespace": "ns"},
               "roleRef": {"kind": "Role", "name": "r"}, "subjects": [{"kind": "ServiceAccount", "name": "sa",
                                                                       "namespace": "ns"}]}
    rbac = Rbac([role, binding])
    allowed = lambda m, p, q=None: rbac.allows(user, groups, request_info(m, p, q or {}))  # noqa: E731
    assert allowed("PATCH", "/api/v1/namespaces/ns/pods/p/status")
    assert not allowed("PATCH", "/api/v1/namespaces/ns/pods/p")
    assert not allowed("PATCH", "/api/v1/namespaces/other/pods/p/status")  # a RoleBinding reaches its namespace only
    assert allowed("PUT", "/apis/coordination.k8s.io/v1/namespaces/ns/leases/mine")
    assert not allowed("PUT", "/apis/coordination.k8s.io/v1/namespaces/ns/leases/theirs")
    assert not allowed("POST", "/apis/coordination.k8s.io/v1/namespaces/ns/leases")  # create has no name to match
    assert not rbac.allows(*service_account_user("ns", "other"), request_info(
        "PATCH", "/api/v1/namespaces/ns/pods/p/status", {}))


def _without(objects: list[dict], verb: str) -> list[dict]:
    return [{**o, "rules": [{**r, "verbs": [v for v in r["verbs"] if v != verb]} for r in o["rules"]]}
            if o["kind"] in ("ClusterRole", "Role") else o for o in objects]


def test_the_prefix_ipam_watch_is_refused_without_the_watch_verb(tmp_path: Path) -> None:
    """Issue 35 defect 2, re-introduced: the rendered ClusterRole without `watch` (as it was) stops the controller at
    its second round with 403, as kube-apiserver would."""
    kube, azure = FakeKube(), FakeAzure()
    rendered = ipam_objects.prefix_ipam_objects({"client_id": "c"}, "api.example", 6443, "agents:1")
    kube.enforce(_without(rendered, "watch"), {"replica-a": ACCOUNT})
    with kube.running(), azure.running(), pytest.MonkeyPatch.context() as patch:
        from gpucluster.agents import prefix_ipam as ipam
        patch.setattr(ipam, "ARM", azure.url)
        patch.setattr(ipam, "IMDS_TOKEN", f"{azure.url}/metadata/identity/oauth2/token")
        populate(kube, azure, {"h100-z1-00": 2}, filled=True)
        ctl = controller(kube, tmp_path)
        ctl.round()  # lists: allowed
        with pytest.raises(kc.ApiError) as refused:
            ctl.round()
    assert refused.value.status == 403
    assert kube.denied[0][1:] == ("watch", "/api/v1/nodes")


def test_the_recheck_cannot_delete_agent_pods_without_its_role(tmp_path: Path) -> None:
    kube = FakeKube()
    rendered = [o for o in health.health_access() if o["kind"] not in ("Role", "RoleBinding")]
    kube.enforce(rendered, {health.RECHECK_ACCOUNT: service_account_user(health.NAMESPACE, health.RECHECK_ACCOUNT)})
    (tmp_path / "token").write_text(health.RECHECK_ACCOUNT)
    with kube.running():
        kube.put_object("/api/v1/nodes", {"metadata": {"name": "h100-0", "labels": {"gpucluster.io/pool": "h100"}},
                                          "spec": {}, "status": {"conditions": [{"type": "Ready", "status": "True"}]}})
        kube.put_object(f"/api/v1/namespaces/{health.NAMESPACE}/pods", {
            "metadata": {"name": "agent-0", "namespace": health.NAMESPACE, "labels": {"app.kubernetes.io/name": "a"}},
            "spec": {"nodeName": "h100-0", "containers": []}, "status": {"phase": "Running"}})
        client = kc.Kube(kube.url, str(tmp_path), timeout=10.0, budget=kc.Budget(1000), retry_base=0.01, retry_cap=0.05)
        assert agent.recheck(client, "h100", 1, health.NAMESPACE, "a") == 1
    assert [d[1] for d in kube.denied] == ["delete"]


def test_the_refusal_reads_as_kube_apiservers() -> None:
    """responsewriters/errors.go forbiddenMessage, with the group-qualified resource NewForbidden is given."""
    kube = FakeKube()
    rendered = ipam_objects.prefix_ipam_objects({"client_id": "c"}, "api.example", 6443, "agents:1")
    kube.enforce(rendered, {"t": ACCOUNT})
    status, body = kube.refuse("DELETE", "/apis/cilium.io/v2/ciliumnodes/n1", {}, "t") or (0, {})
    assert status == 403 and body["reason"] == "Forbidden" and body["code"] == 403
    assert body["message"] == ('ciliumnodes.cilium.io "n1" is forbidden: User "system:serviceaccount:kube-system:'
                               'gpucluster-prefix-ipam" cannot delete resource "ciliumnodes" in API group "cilium.io" '
                               'at the cluster scope')
    assert kube.refuse("GET", "/api/v1/nodes", {"watch": "1"}, "t") is None
    assert (kube.refuse("GET", "/api/v1/nodes", {}, "someone") or (0,))[0] == 401
