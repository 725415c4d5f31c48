"""Node bootstrap: the cloud-config parses and carries the join, kubelet settings, labels and taints."""

from __future__ import annotations

import yaml

from gpucluster.bootstrap.node import ARP_SYSCTLS, NodeBootstrap, render_cloud_init
from gpucluster.planning.cluster_plan import plan_cluster
from gpucluster.planning.node_template import PREFLIGHT_TAINT, autoscaler_tags, node_labels, split_min
from gpucluster.planning.taints import NodeTaint
from gpucluster.vocabulary import LABEL_IB_DOMAIN, TAINT_PREFLIGHT
from tests.support.stacks import small_spec


def _files(text: str) -> dict[str, str]:
    assert text.startswith("#cloud-config\n")
    document = yaml.safe_load(text)
    return {f["path"]: f["content"] for f in document["write_files"]}


def _bootstrap() -> NodeBootstrap:
    return NodeBootstrap(
        kubernetes_version="1.36.4", api_server_endpoint="10.0.0.4:6443", bootstrap_token="abcdef.0123456789abcdef",
        ca_cert_hash="sha256:" + "0" * 64, max_pods=32, cluster_dns="192.168.0.10",
        labels={LABEL_IB_DOMAIN: "h100-z1-00", "gpucluster.io/pool": "h100"},
        taints=(PREFLIGHT_TAINT, NodeTaint("nvidia.com/gpu", "present", "NoSchedule")))


def test_cloud_config_joins_with_token_and_hash() -> None:
    files = _files(render_cloud_init(_bootstrap()))
    join = yaml.safe_load(files["/etc/kubernetes/kubeadm-join.yaml"])
    assert join["kind"] == "JoinConfiguration"
    token = join["discovery"]["bootstrapToken"]
    assert token == {"apiServerEndpoint": "10.0.0.4:6443", "token": "abcdef.0123456789abcdef",
                     "caCertHashes": ["sha256:" + "0" * 64]}
    labels = join["nodeRegistration"]["kubeletExtraArgs"][0]
    assert labels["name"] == "node-labels" and f"{LABEL_IB_DOMAIN}=h100-z1-00" in labels["value"]


def test_kubelet_patch_has_max_pods_taints_and_parallel_pulls() -> None:
    kubelet = yaml.safe_load(_files(render_cloud_init(_bootstrap()))[
        "/etc/kubernetes/patches/kubeletconfiguration+strategic.yaml"])
    assert kubelet["maxPods"] == 32 and kubelet["serializeImagePulls"] is False
    keys = [t["key"] for t in kubelet["registerWithTaints"]]
    assert keys == [TAINT_PREFLIGHT, "nvidia.com/gpu"]


def test_arp_sysctls_are_in_every_node_image_not_the_boot_document() -> None:
    """The node images carry the sysctl file (tests/test_sysctl_order.py checks which value wins)."""
    from gpucluster.bake.content import image_files
    from gpucluster.bootstrap.host_prep import SYSCTL_FILE

    assert SYSCTL_FILE not in _files(render_cloud_init(_bootstrap()))
    for definition in ("gpu", "cpu", "confidential"):
        sysctl = next(f.content for f in image_files(definition) if f.path == SYSCTL_FILE)
        for key, value in ARP_SYSCTLS.items():
            assert f"{key} = {value}" in sysctl


def test_labels_and_autoscaler_tags_follow_the_scale_set() -> None:
    plan = plan_cluster(small_spec())
    gpu = plan.pools[1]
    first = gpu.scale_sets[0]
    labels = node_labels(gpu, first, "eastus")
    assert labels[LABEL_IB_DOMAIN] == first.name == "gpu-z1-00"
    assert labels["topology.kubernetes.io/zone"] == "eastus-1"
    assert labels["gpucluster.io/gpu-product"] == "H100-80GB-HBM3"
    tags = autoscaler_tags("test", gpu, first, 0, "eastus")
    assert tags["cluster-autoscaler-enabled"] == "true" and tags["max"] == str(first.capacity)
    assert tags["k8s.io_cluster-autoscaler_node-template_label_gpucluster.io_infiniband-domain"] == "gpu-z1-00"
    assert tags["k8s.io_cluster-autoscaler_node-template_label_accelerator"] == "nvidia"
    assert tags["k8s.io_cluster-autoscaler_node-template_resources_nvidia.com_gpu"] == "8"


def test_min_count_spreads_over_scale_sets() -> None:
    plan = plan_cluster(small_spec())
    system = plan.pools[0]
    assert sum(split_min(system)) == 0
    raw_min = small_spec(pools=[{"name": "system", "kind": "system", "vmSize": "Standard_D4s_v5", "count": 7,
                                 "minCount": 5}])
    assert sum(split_min(plan_cluster(raw_min).pools[0])) == 5
