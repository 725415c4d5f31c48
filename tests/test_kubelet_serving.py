"""Kubelet serving certificates signed by the cluster CA, requested by CSR and approved only for the node's own
name and the plan's node subnets; the API server verifies them."""

from __future__ import annotations

import re
from ipaddress import IPv4Address, IPv4Network
from typing import Any

import yaml

from gpucluster.azure.api_servers import API_SCALE_SET
from gpucluster.catalog.in_cluster import CSR_APPROVER_IMAGE
from gpucluster.kubernetes.objects.csr_approver import API_SERVER_COMPUTER_NAME_PREFIX, csr_approver_from_plan
from gpucluster.kubernetes.objects.images import serve_objects
from gpucluster.offline.boot_docs import boot_documents
from gpucluster.planning.cluster_plan import plan_cluster
from tests.support.stacks import stack_spec

FLAGS_V1_2_14 = ("level", "metrics-bind-address", "health-probe-bind-address", "leader-election", "provider-regex",
                 "max-expiration-sec", "bypass-dns-resolution", "bypass-hostname-check", "ignore-non-system-node",
                 "skip-deny-step", "allowed-dns-names", "provider-ip-prefixes")
"""postfinance/kubelet-csr-approver v1.2.14 `internal/cmd/cmd.go` (prepareCmdlineConfig): its flags, read also
from the environment by ff's `WithEnvVars` (FLAG-NAME -> FLAG_NAME)."""


def _files(document: str) -> dict[str, str]:
    return {f["path"]: f["content"] for f in yaml.safe_load(document)["write_files"]}


def _env(objects: list[dict[str, Any]]) -> dict[str, str]:
    deployment = next(o for o in objects if o["kind"] == "Deployment")
    container, = deployment["spec"]["template"]["spec"]["containers"]
    return {e["name"]: e["value"] for e in container["env"]}


def test_every_kubelet_asks_for_a_serving_certificate_and_the_api_server_verifies_it() -> None:
    """`serverTLSBootstrap` (k8s.io/kubelet config/v1beta1 KubeletConfiguration): the kubelet requests its serving
    certificate with a kubernetes.io/kubelet-serving CSR instead of signing one itself. kube-apiserver's
    `--kubelet-certificate-authority` makes logs, exec and port-forward verify it (without it the API server
    does not check the kubelet's certificate: kube-apiserver flags reference)."""
    documents = boot_documents(plan_cluster(stack_spec("dev")))
    api = _files(documents["apiserver.yaml"])
    _, cluster, kubelet = yaml.safe_load_all(api["/etc/kubernetes/kubeadm.yaml"])
    assert kubelet["kind"] == "KubeletConfiguration" and kubelet["serverTLSBootstrap"] is True
    args = {a["name"]: a["value"] for a in cluster["apiServer"]["extraArgs"]}
    assert args["kubelet-certificate-authority"] == "/etc/kubernetes/pki/ca.crt"
    assert "/etc/kubernetes/pki/ca.crt" in api  # the CA file the flag names is written at boot
    pools = [name for name in documents if name.startswith("pool-")]
    assert pools
    for name in pools:
        patch = yaml.safe_load(_files(documents[name])["/etc/kubernetes/patches/kubeletconfiguration+strategic.yaml"])
        assert patch["serverTLSBootstrap"] is True, name


def test_the_approver_admits_the_plans_machines_only() -> None:
    """kubelet-csr-approver v1.2.14 (`internal/controller/regex_ip_checks.go`): each SAN DNS name must start with
    the node name and match PROVIDER_REGEX; each SAN IP must lie in PROVIDER_IP_PREFIXES. A node's name is its
    computer name: the scale set's computerNamePrefix (its name) and Azure's instance suffix."""
    plan = plan_cluster(stack_spec("prod"))
    env = _env(csr_approver_from_plan(plan))
    regex = re.compile(env["PROVIDER_REGEX"])  # RE2 and Python agree on this subset: alternation, classes, anchors
    assert API_SERVER_COMPUTER_NAME_PREFIX == API_SCALE_SET
    for pool in plan.pools:
        for scale_set in pool.scale_sets:
            assert regex.fullmatch(f"{scale_set.name}00002a"), scale_set.name
    assert regex.fullmatch("apiserver000001")
    assert not regex.fullmatch("evil000001") and not regex.fullmatch("apiserver.attacker.example")
    prefixes = [IPv4Network(p) for p in env["PROVIDER_IP_PREFIXES"].split(",")]
    machine_blocks = [b for b in plan.ip.blocks if b.name.startswith("pool-") or b.name == "controlplane"]
    assert len(machine_blocks) == len(plan.pools) + 1
    for block in machine_blocks:
        assert block.cidr in prefixes, block.name
    outside = IPv4Address("8.8.8.8")
    assert not any(outside in p for p in prefixes)
    assert env["BYPASS_DNS_RESOLUTION"] == "true" and env["ALLOWED_DNS_NAMES"] == "1"


def test_the_approver_reads_only_flags_its_release_has_and_pulls_through_the_registry() -> None:
    plan = plan_cluster(stack_spec("dev"))
    objects = serve_objects(csr_approver_from_plan(plan), plan.registry)
    env = _env(objects)
    assert {name.lower().replace("_", "-") for name in env} <= set(FLAGS_V1_2_14)
    deployment = next(o for o in objects if o["kind"] == "Deployment")
    container, = deployment["spec"]["template"]["spec"]["containers"]
    assert container["image"].startswith(plan.registry.login_server + "/")
    assert container["image"].endswith("/postfinance/kubelet-csr-approver:v1.2.14")
    assert CSR_APPROVER_IMAGE == "ghcr.io/postfinance/kubelet-csr-approver:v1.2.14"
    role = next(o for o in objects if o["kind"] == "ClusterRole")
    approve = [r for r in role["rules"] if "approve" in r["verbs"]]
    assert approve == [{"apiGroups": ["certificates.k8s.io"], "resources": ["signers"],
                        "resourceNames": ["kubernetes.io/kubelet-serving"], "verbs": ["approve"]}]
