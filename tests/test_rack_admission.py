"""A rack-sized gang through the rendered Kueue objects of the gb300 stack, admitted by the model of kueue v0.19.2's
admission in tests/support/kueue_admission.py (each step cited there); the objects are first validated against the
vendored CRD schemas (components/kubernetes/crds/kueue-v0.19.2)."""

from __future__ import annotations

from collections import Counter

from gpucluster.kubernetes.objects.kueue import (
    CHANNEL_RESOURCE,
    COMPUTE_DOMAIN_CHANNEL_CLASS,
    kueue_configuration,
)
from gpucluster.vocabulary import ANNOTATION_REQUIRED_TOPOLOGY
from tests.support.kueue_admission import (
    GPU,
    HOSTNAME,
    TOLERATE_GPU,
    Gang,
    InadmissibleError,
    admit,
    rack_kueue_config,
    rack_nodes,
    rack_objects,
    racks_of,
    tas_placement,
)
from tests.support.manifest_validation import validate_object


def test_the_rendered_kueue_objects_pass_their_crd_schemas() -> None:
    for obj in rack_objects().values():
        validate_object(obj)
    assert [lv["nodeLabel"] for lv in rack_objects()[("Topology", "nvlink")]["spec"]["levels"]] == [
        "gpucluster.io/infiniband-domain", "gpucluster.io/rack", HOSTNAME]
    assert rack_kueue_config()["resources"]["deviceClassMappings"] == [
        {"name": CHANNEL_RESOURCE, "deviceClassNames": [COMPUTE_DOMAIN_CHANNEL_CLASS]},
        {"name": "dra.net/nic", "deviceClassNames": ["dranet.net"]}]  # DRANET's NICs (tests/test_rack_dra.py)
    assert ANNOTATION_REQUIRED_TOPOLOGY == "kueue.x-k8s.io/podset-required-topology"


def test_a_72_gpu_gang_is_admitted_onto_exactly_one_rack() -> None:
    placement = admit(Gang(18, 4, tolerations=TOLERATE_GPU), "frontier", rack_nodes(), rack_kueue_config())
    assert len(placement) == 18 and len(set(placement.values())) == 18
    assert len(racks_of(placement)) == 1


def test_a_rack_with_a_node_down_is_passed_over_for_a_whole_one() -> None:
    down = frozenset({"gb300-z1-g00r00-000003"})
    placement = admit(Gang(18, 4, tolerations=TOLERATE_GPU), "frontier", rack_nodes(down), rack_kueue_config())
    assert racks_of(placement) != {"gb300-z1-g00r00"} and len(racks_of(placement)) == 1


def test_a_gang_larger_than_a_rack_is_not_split_over_racks() -> None:
    try:
        admit(Gang(19, 4, tolerations=TOLERATE_GPU), "frontier", rack_nodes(), rack_kueue_config())
    except InadmissibleError:
        return
    raise AssertionError("a 76-GPU gang requiring one rack was admitted")


def test_without_the_required_rack_level_the_same_gang_may_span_racks() -> None:
    """What the rack level buys: placed by the group level, 36 pods of one group take both its racks."""
    placement = admit(Gang(36, 4, required_level="gpucluster.io/infiniband-domain", tolerations=TOLERATE_GPU),
                      "frontier", rack_nodes(), rack_kueue_config())
    assert len(racks_of(placement)) == 2


def test_an_unmapped_device_class_is_rejected() -> None:
    gang = Gang(18, 4, device_class="gpu.nvidia.com", tolerations=TOLERATE_GPU)
    try:
        admit(gang, "frontier", rack_nodes(), rack_kueue_config())
    except InadmissibleError as refused:
        assert "DeviceClass gpu.nvidia.com is not mapped in DRA configuration" in str(refused)
        return
    raise AssertionError("admitted a workload whose DeviceClass has no mapping")


def test_without_the_mapping_the_channel_class_itself_is_rejected() -> None:
    try:
        admit(Gang(18, 4, tolerations=TOLERATE_GPU), "frontier", rack_nodes(), kueue_configuration(30))
    except InadmissibleError as refused:
        assert COMPUTE_DOMAIN_CHANNEL_CLASS in str(refused)
        return
    raise AssertionError("admitted a ComputeDomain workload without deviceClassMappings")


def test_channel_quota_is_one_per_node_of_gpu_quota_on_rack_flavors() -> None:
    # dra-driver-nvidia-gpu v25.12.0: one claimable channel per node (DeviceClass selects id == 0), 4 GPUs per node
    [group] = rack_objects()[("ClusterQueue", "frontier")]["spec"]["resourceGroups"]
    rows = Counter({r["name"]: r["nominalQuota"] for r in group["flavors"][0]["resources"]})
    assert rows[GPU] == 216 and rows[CHANNEL_RESOURCE] == 216 // 4 == 54


def test_a_4_gpu_per_pod_gang_is_admitted_one_pod_per_node() -> None:
    placement = admit(Gang(6, 4, tolerations=TOLERATE_GPU), "frontier", rack_nodes(), rack_kueue_config())
    assert len(placement) == len(set(placement.values())) == 6 and len(racks_of(placement)) == 1


def test_a_1_gpu_per_pod_rack_gang_is_refused_with_the_reason() -> None:
    gang = Gang(8, 1, tolerations=TOLERATE_GPU)
    # what admission would do without the policy: TAS counts GPUs only and packs 4 pods on a node, whose one channel
    # serves one of them (the others stay Pending)
    placed = tas_placement(gang, rack_objects()[("ResourceFlavor", "gb300")]["spec"], rack_nodes())
    assert placed is not None and max(Counter(placed.values()).values()) == 4
    try:
        admit(gang, "frontier", rack_nodes(), rack_kueue_config())
    except InadmissibleError as refused:
        assert "one pod per node with 4 nvidia.com/gpu" in str(refused) and "one IMEX channel per node" in str(refused)
        return
    raise AssertionError("admitted a rack gang of 1-GPU pods that the DRA driver cannot give a channel each")


def test_the_shape_rule_judges_rack_gangs_with_claims_only() -> None:
    # a 1-GPU-per-pod gang placed by the group level (no rack-wide NVLink asked) is not judged by the shape rule
    placement = admit(Gang(8, 1, required_level="gpucluster.io/infiniband-domain", tolerations=TOLERATE_GPU),
                      "frontier", rack_nodes(), rack_kueue_config())
    assert len(placement) == 8
