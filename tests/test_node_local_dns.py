"""DNS that survives the API: NodeLocal DNSCache on every node, CoreDNS and the cache serving stale answers, the
kubelets pointed at the cache, and no component watching Endpoints.

Consumers: the upstream add-on (kubernetes/kubernetes cluster/addons/dns/nodelocaldns/nodelocaldns.yaml, read at a
stored revision with image 1.26.4) and its install doc (kubernetes/website tasks/administer-cluster/nodelocaldns.md,
the variant for a kubelet pointed at the cache); CoreDNS v1.14.2 plugin/cache/README.md (`serve_stale [DURATION]
[REFRESH_MODE]` inside a `cache` block) and plugin/kubernetes/controller.go (what it watches); kubelet's
clusterDNS (k8s.io/kubelet config/v1beta1 KubeletConfiguration).
"""

from __future__ import annotations

from typing import Any

import yaml

from gpucluster.kubernetes.objects.dns import COREFILE
from gpucluster.kubernetes.objects.nodelocaldns import corefile, node_local_dns_objects
from gpucluster.offline.boot_docs import boot_documents
from gpucluster.offline.engine import ProgramRun
from gpucluster.offline.manifests import kubernetes_objects
from gpucluster.planning.ip_plan import NODE_LOCAL_DNS_IP
from gpucluster.simulation.check import plan_checked
from tests.support.manifest_validation import validate_object
from tests.support.stacks import stack_spec

CLUSTER_DNS = "192.168.0.10"


def _by_kind(objects: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {f"{o['kind']}/{o['metadata']['name']}": o for o in objects}


def _blocks_well_formed(text: str) -> None:
    """coredns/caddy dispenser: `{` ends its line, `}` stands alone (tests/test_in_cluster_rules.py)."""
    depth = 0
    for line in text.splitlines():
        tokens = line.split()
        if "{" in tokens:
            assert tokens[-1] == "{", line
            depth += 1
        if "}" in tokens:
            assert tokens == ["}"], line
            depth -= 1
        assert depth >= 0
    assert depth == 0


def _caches(text: str) -> list[list[str]]:
    """The option lines of every `cache` block."""
    found, current = [], None
    for line in text.splitlines():
        tokens = line.split()
        if tokens[:1] == ["cache"] and tokens[-1] == "{":
            current = []
        elif current is not None and tokens == ["}"]:
            found.append(current)
            current = None
        elif current is not None:
            current.append(line.strip())
    return found


def test_the_objects_have_the_upstream_shape_and_validate() -> None:
    objects = _by_kind(node_local_dns_objects(CLUSTER_DNS))
    assert set(objects) == {"ServiceAccount/node-local-dns", "Service/kube-dns-upstream", "ConfigMap/node-local-dns",
                            "DaemonSet/node-local-dns", "Service/node-local-dns"}
    for o in objects.values():
        validate_object(o)
    pod = objects["DaemonSet/node-local-dns"]["spec"]["template"]["spec"]
    assert pod["hostNetwork"] is True and pod["dnsPolicy"] == "Default"
    assert pod["priorityClassName"] == "system-node-critical"
    # Every node, whatever its taints.
    assert {"effect": "NoSchedule", "operator": "Exists"} in pod["tolerations"]
    assert {"effect": "NoExecute", "operator": "Exists"} in pod["tolerations"]
    args = pod["containers"][0]["args"]
    # The variant for a kubelet pointed at the cache: the link-local address only, never the kube-dns ClusterIP
    # (Cilium's kube-proxy replacement owns service addresses).
    assert args[args.index("-localip") + 1] == NODE_LOCAL_DNS_IP and CLUSTER_DNS not in args
    assert objects["Service/kube-dns-upstream"]["spec"]["selector"] == {"k8s-app": "kube-dns"}


def test_the_caches_serve_stale_answers_and_still_count_them() -> None:
    """serve_stale keeps answers flowing when CoreDNS or the API servers fail; `verify` tries the source first, so
    a stale answer is served only when the source fails, and each counts in coredns_cache_served_stale_total."""
    node_local = corefile(CLUSTER_DNS)
    for text in (node_local, COREFILE):
        _blocks_well_formed(text)
        caches = _caches(text)
        assert caches and all("serve_stale 1h verify" in c for c in caches), text
    assert "__PILLAR__" not in node_local.replace("__PILLAR__UPSTREAM__SERVERS__", "")  # node-cache fills only that
    assert node_local.count(f"bind {NODE_LOCAL_DNS_IP}") == 4 and f"forward . {CLUSTER_DNS} {{" in node_local
    assert f"health {NODE_LOCAL_DNS_IP}:8080" in node_local


def test_kubelets_resolve_through_the_cache() -> None:
    """kubelet clusterDNS is what every ClusterFirst pod's resolv.conf names: the cache's link-local address."""
    plan = plan_checked(stack_spec("dev"))
    documents = boot_documents(plan)
    pools = {name: text for name, text in documents.items() if name.startswith("pool-")}
    assert pools
    for name, text in pools.items():
        files = {f["path"]: f["content"] for f in yaml.safe_load(text)["write_files"]}
        patch = yaml.safe_load(next(v for k, v in files.items() if k.endswith("kubeletconfiguration+strategic.yaml")))
        assert patch["clusterDNS"] == [NODE_LOCAL_DNS_IP], name


def test_the_cache_runs_on_every_pool_in_the_first_boot() -> None:
    plan = plan_checked(stack_spec("prod"))
    assert plan.bring_up is not None
    placed = plan.bring_up.placements()
    # It tolerates every taint: the API servers' nodes run it too (their pods ask it, as every kubelet's clusterDNS).
    assert set(placed["node-local-dns"]) == {p.name for p in plan.pools} | {"apiservers"}
    assert "API Priority and Fairness: gpucluster-node-agents, gpucluster-breakglass" in placed


def test_no_rendered_role_lets_anything_list_or_watch_endpoints(prod_run: ProgramRun) -> None:
    """EndpointSlices only: a watch on core Endpoints from many clients is the load OpenAI cut (their API servers
    at 70 GB of heap; EndpointSlices made it 1000x smaller). CoreDNS v1.12.1-v1.14.2 watches EndpointSlices."""
    for o in kubernetes_objects(prod_run.registrations):
        if o["kind"] not in ("ClusterRole", "Role"):
            continue
        for rule in o.get("rules", []):
            reads = set(rule.get("verbs", [])) & {"list", "watch", "*"}
            core = {"", "*"} & set(rule.get("apiGroups", []))
            endpoints = {"endpoints", "*"} & set(rule.get("resources", []))
            assert not (reads and core and endpoints), f"{o['metadata']['name']} may {sorted(reads)} Endpoints"
    coredns = next(o for o in kubernetes_objects(prod_run.registrations)
                   if o["kind"] == "ClusterRole" and o["metadata"]["name"] == "system:coredns")
    assert {r for rule in coredns["rules"] for r in rule["resources"]} == {"services", "namespaces", "endpointslices"}


def test_the_image_comes_from_the_cluster_registry(prod_run: ProgramRun) -> None:
    objects = kubernetes_objects(prod_run.registrations)
    daemonset = next(o for o in objects if o["kind"] == "DaemonSet" and o["metadata"]["name"] == "node-local-dns")
    image = daemonset["spec"]["template"]["spec"]["containers"][0]["image"]
    assert ".azurecr.io/" in image and image.endswith("dns/k8s-dns-node-cache:1.26.4")
