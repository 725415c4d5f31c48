"""Every stack value Azure or Kubernetes would refuse is refused at the spec, one line at its YAML path.

Each case names the consumer's rule (components/spec/consumer_rules.py holds the sources): kubelet's
--node-labels (kubernetes staging/src/k8s.io/kubelet/pkg/apis/well_known_labels.go), the API server's taint
validation (pkg/apis/core/validation/validation.go), Azure's tag limits (tag-resources "Limitations"), adminUsername
("Disallowed values", Microsoft.Compute OSProfile), VNet ranges (virtual-networks-faq), kubeadm's DNS IP
(cmd/kubeadm/app/constants GetDNSIP), scale-set size (1,000 VMs).
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519, rsa

from gpucluster.errors import SpecError
from gpucluster.planning.cluster_plan import plan_cluster
from tests.support.stacks import small_cluster, spec_of


def _problems(raw: dict[str, Any]) -> list[str]:
    with pytest.raises(SpecError) as caught:
        plan_cluster(spec_of(raw))
    return [str(p) for p in caught.value.problems]


def _with_pool(**changes: Any) -> dict[str, Any]:
    raw = small_cluster()
    raw["pools"][1].update(changes)
    return raw


def _public_key(kind: str = "ed25519", bits: int = 2048) -> str:
    key = ed25519.Ed25519PrivateKey.generate() if kind == "ed25519" else rsa.generate_private_key(65537, bits)
    return key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH).decode()


def _private_key() -> str:
    return ed25519.Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption()).decode()


REFUSED: list[tuple[str, dict[str, Any], str, str]] = [
    # (case, raw stack, path, words the message must hold)
    ("label node-role", _with_pool(labels={"node-role.kubernetes.io/gpu": ""}), "cluster.pools[1].labels",
     "kubelet refuses"),
    ("label kubernetes.io other", _with_pool(labels={"kubernetes.io/team": "a"}), "cluster.pools[1].labels",
     "kubelet refuses"),
    ("label k8s.io", _with_pool(labels={"example.k8s.io/x": "a"}), "cluster.pools[1].labels", "kubelet refuses"),
    # kubelet accepts its own labels in --node-labels, so one would name every node of the pool the same
    ("label hostname", _with_pool(labels={"kubernetes.io/hostname": "gpu"}), "cluster.pools[1].labels",
     "kubelet sets it on each node itself"),
    ("label zone", _with_pool(labels={"topology.kubernetes.io/zone": "1"}), "cluster.pools[1].labels",
     "kubelet sets it on each node itself"),
    ("label overrides the pool label", _with_pool(labels={"gpucluster.io/pool": "other"}), "cluster.pools[1].labels",
     "library's own"),
    ("label key two slashes", _with_pool(labels={"a/b/c": "x"}), "cluster.pools[1].labels", "more than one '/'"),
    ("label key too long", _with_pool(labels={"x" * 64: "v"}), "cluster.pools[1].labels", "1-63"),
    ("label value bad chars", _with_pool(labels={"team": "a b"}), "cluster.pools[1].labels", "at most 63"),
    ("label value too long", _with_pool(labels={"team": "a" * 64}), "cluster.pools[1].labels", "at most 63"),
    ("taint bad value", _with_pool(taints=[{"key": "dedicated", "value": "-bad-", "effect": "NoSchedule"}]),
     "cluster.pools[1].taints[0]", "value '-bad-'"),
    ("taint bad key", _with_pool(taints=[{"key": "UPPER.example/x", "value": "", "effect": "NoSchedule"}]),
     "cluster.pools[1].taints[0]", "DNS subdomain"),
    ("duplicate taints", _with_pool(taints=[{"key": "a", "effect": "NoSchedule"}, {"key": "a", "effect": "NoSchedule"}]),
     "cluster.pools[1].taints", "unique by key and effect"),
    ("taint under the library prefix", _with_pool(taints=[{"key": "gpucluster.io/preflight", "effect": "NoSchedule"}]),
     "cluster.pools[1].taints[0]", "library's own"),
    ("46 tags and the library's 5", small_cluster(tags={f"t{i}": "v" for i in range(46)}), "cluster.tags", "50 tags"),
    ("tag name with <", small_cluster(tags={"a<b": "v"}), "cluster.tags", "refuses in tag names"),
    ("tag name with /", small_cluster(tags={"team/x": "v"}), "cluster.tags", "refuses in tag names"),
    ("tag value 50 MB", small_cluster(tags={"owner": "x" * 50_000_000}), "cluster.tags", "Azure allows 256"),
    ("admin user admin", small_cluster(access={"adminUsername": "admin"}), "cluster.access.adminUsername",
     "Azure refuses"),
    ("admin user root", small_cluster(access={"adminUsername": "root"}), "cluster.access.adminUsername",
     "Azure refuses"),
    ("ssh not a key", small_cluster(access={"sshPublicKeys": ["hello world"]}), "cluster.access.sshPublicKeys",
     "not an OpenSSH public key"),
    ("ssh bad base64", small_cluster(access={"sshPublicKeys": ["ssh-ed25519 !!!notbase64"]}),
     "cluster.access.sshPublicKeys", "not base64"),
    ("ssh truncated key", small_cluster(access={"sshPublicKeys": ["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAA"]}),
     "cluster.access.sshPublicKeys", "does not parse"),
    ("ssh short RSA", small_cluster(access={"sshPublicKeys": [_public_key("rsa", 1024)]}),
     "cluster.access.sshPublicKeys", "2048"),
    ("vnet loopback", small_cluster(network={"addressSpace": ["127.0.0.0/16"]}), "cluster.network.addressSpace",
     "loopback"),
    ("vnet link-local", small_cluster(network={"addressSpace": ["169.254.0.0/16"]}), "cluster.network.addressSpace",
     "link-local"),
    ("vnet multicast", small_cluster(network={"addressSpace": ["224.0.0.0/8"]}), "cluster.network.addressSpace",
     "multicast"),
    ("service range without a DNS IP", small_cluster(network={"addressSpace": ["10.10.0.0/16"],
                                                             "serviceCidr": "192.168.0.0/29"}),
     "cluster.network.serviceCidr", "10th"),
    ("hub id garbage", small_cluster(network={"addressSpace": ["10.10.0.0/16"], "hubVnetId": "garbage"}),
     "cluster.network.hubVnetId", "VNet resource id"),
    ("large scale set above 1,000", small_cluster(limits={"vmsPerLargeScaleSet": {"value": 5000, "note": "ticket"}}),
     "cluster.limits.vmsPerLargeScaleSet", "1000"),
    ("pool zones repeated", _with_pool(zones=["1", "1"]), "cluster.pools[1].zones", "more than once"),
    ("cluster zones repeated", small_cluster(zones=["1", "2", "2"]), "cluster.zones", "more than once"),
    ("zone 4", small_cluster(zones=["1", "4"]), "cluster.zones[1]", "does not exist in eastus"),
    ("count 1e30", _with_pool(count=1e30), "cluster.pools[1].count", "whole number"),
    ("count 2**63", _with_pool(count=2**63), "cluster.pools[1].count", "<= 65536"),
    ("count true", _with_pool(count=True), "cluster.pools[1].count", "whole number (got true)"),
    ("pods per node 300", _with_pool(podsPerNode=300), "cluster.pools[1].podsPerNode", "<= 255"),
    ("etcd members 101", small_cluster(controlPlane={"etcd": {"members": 101}}), "cluster.controlPlane.etcd.members",
     "<= 9"),
]


@pytest.mark.parametrize(("raw", "path", "words"), [c[1:] for c in REFUSED], ids=[c[0] for c in REFUSED])
def test_refused_at_its_path(raw: dict[str, Any], path: str, words: str) -> None:
    lines = _problems(copy.deepcopy(raw))
    assert any(line.startswith(path) and words in line for line in lines), lines
    assert all(len(line) < 600 and "\n" not in line for line in lines)  # one readable line each


def test_a_private_key_is_refused_and_never_echoed() -> None:
    private = _private_key()
    lines = _problems(small_cluster(access={"sshPublicKeys": [private]}))
    assert lines[0].startswith("cluster.access.sshPublicKeys: [0] is a private key")
    body = private.splitlines()[1]
    assert all(body not in line for line in lines)


def test_pool_tags_count_labels_and_taints() -> None:
    """A pool's scale sets carry one autoscaler template tag per label; 40 labels push them past 50."""
    lines = _problems(_with_pool(labels={f"example.com/l{i}": "v" for i in range(40)}))
    assert any(line.startswith("cluster.pools[1].labels") and "Azure allows 50" in line for line in lines), lines


def test_too_many_nodes_in_all() -> None:
    raw = small_cluster()
    raw["pools"] += [{"name": f"cpu{i}", "kind": "cpu", "vmSize": "Standard_D4s_v5", "count": 60_000} for i in range(2)]
    with pytest.raises(SpecError) as caught:
        spec_of(raw)
    assert "fixed" in str(caught.value) and "65,536" in str(caught.value)


ACCEPTED: list[tuple[str, dict[str, Any]]] = [
    ("kubelet's own namespaces", _with_pool(labels={"node.kubernetes.io/exclude-from-external-load-balancers": "",
                                                    "x.kubelet.kubernetes.io/y": "z"})),
    ("a label of your own", _with_pool(labels={"example.com/team": "a_b-c.d", "team": ""})),
    ("taints differing by effect", _with_pool(taints=[{"key": "a", "effect": "NoSchedule"},
                                                      {"key": "a", "effect": "NoExecute"}])),
    ("45 tags", small_cluster(tags={f"t{i}": "v" for i in range(45)})),
    ("ed25519 and RSA 4096 keys", small_cluster(access={"sshPublicKeys": [_public_key(), _public_key("rsa", 4096)]})),
    ("a /28 service range", small_cluster(network={"addressSpace": ["10.10.0.0/16"], "serviceCidr": "192.168.0.0/28"})),
    ("a real hub id", small_cluster(network={"addressSpace": ["10.10.0.0/16"], "hubVnetId":
        "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/hub-rg/providers/Microsoft.Network/"
        "virtualNetworks/hub-vnet"})),
    ("a count written as text", _with_pool(count="150")),
]


@pytest.mark.parametrize("raw", [c[1] for c in ACCEPTED], ids=[c[0] for c in ACCEPTED])
def test_accepted_where_the_consumers_accept(raw: dict[str, Any]) -> None:
    plan_cluster(spec_of(copy.deepcopy(raw)))
