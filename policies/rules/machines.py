"""Safety rules on single machines (scale sets and VMs): tags, scale-set settings, confidential VMs, etcd."""

from __future__ import annotations

from pulumi_policy import ReportViolation, ResourceValidationArgs, Severity

from .declare import Config, resource_rule
from .props import (
    AUTOSCALER_ENABLED_TAG,
    CLUSTER_TAG,
    DYNAMIC_RESOURCE,
    ETCD_ROLES,
    INFINIBAND_TAG,
    MACHINE_TYPES,
    POOL_TAG,
    ROLE_TAG,
    SCALE_SET,
    VIRTUAL_MACHINE,
    get,
    kind,
    nic_configs,
    role,
    tags,
    zones,
)

REQUIRED_TAGS = (CLUSTER_TAG, ROLE_TAG, POOL_TAG)
ROLES = ("system", "cpu", "gpu", "confidential", "rack", "apiserver", *ETCD_ROLES, "deploy-runner")
NODE_ROLES_WITH_AN = ("system", "cpu", "gpu")
ENCRYPTION_TYPES = ["VMGuestStateOnly", "DiskWithVMGuestState"]
# What `pulumi preview --json` and the offline engine print in place of a secret value.
SECRET_MARK = "[secret]"


@resource_rule(
    "azure-native-compute-machines-require-tags", types=MACHINE_TYPES, severity=Severity.MEDIUM,
    description=f"Scale sets and VMs carry {CLUSTER_TAG}, {ROLE_TAG} and {POOL_TAG}; the other rules, "
                "cost reports and the autoscaler's discovery key on them.",
    remediation="Build machines through the gpucluster components, which set the tags, or add the missing ones.")
def require_machine_tags(args: ResourceValidationArgs, report: ReportViolation, _: Config) -> None:
    present = tags(args.props)
    missing = [t for t in REQUIRED_TAGS if not present.get(t)]
    if missing:
        report(f"missing tags {', '.join(missing)}", None)
    elif present[ROLE_TAG] not in ROLES:
        report(f"{ROLE_TAG} is {present[ROLE_TAG]!r}; expected one of {', '.join(ROLES)}", None)


@resource_rule(
    "azure-native-compute-virtualmachinescaleset-no-overprovision", types=(SCALE_SET,), severity=Severity.HIGH,
    description="Node scale sets set overprovision: false; the extra VMs Azure starts would boot and join the cluster.",
    remediation="Set overprovision=False on the scale set.")
def no_overprovision(args: ResourceValidationArgs, report: ReportViolation, _: Config) -> None:
    if get(args.props, "overprovision") is not False:
        report("overprovision is not false: Azure would start extra VMs that try to join the cluster", None)


@resource_rule(
    "azure-native-compute-virtualmachinescaleset-capacity-ignored", types=(SCALE_SET,), severity=Severity.HIGH,
    description="Scale sets the cluster autoscaler manages are declared through the route whose update never sends "
                "sku (a dynamic resource with armType Microsoft.Compute/virtualMachineScaleSets): azure-native's typed "
                "class updates with a full-body PUT, and ignore_changes=['sku.capacity'] puts the stored old capacity "
                "in it, not the live one (pulumi/pulumi#2657), so every later update resizes the pool.",
    remediation="Declare node scale sets through components/azure/node_pool.py (NodeScaleSet), whose update is a "
                "PATCH without sku (docs/capacity.md).")
def capacity_left_to_autoscaler(args: ResourceValidationArgs, report: ReportViolation, _: Config) -> None:
    if tags(args.props).get(AUTOSCALER_ENABLED_TAG) == "true" and args.resource_type != DYNAMIC_RESOURCE:
        report(f"the autoscaler owns sku.capacity but {args.resource_type} sends the scale set's whole body, "
               "capacity included, on every update: `pulumi up` would resize the pool under the autoscaler", None)


@resource_rule(
    "azure-native-compute-virtualmachinescaleset-infiniband-domain", types=(SCALE_SET,), severity=Severity.HIGH,
    description="An InfiniBand scale set is one domain: Uniform, singlePlacementGroup: true, one zone, and within "
                "the VMs-per-domain limit.",
    remediation="Let the placement planner split the pool; raise maxVmsPerInfinibandDomain only with the Azure "
                "support ticket that raised the limit.",
    config={"maxVmsPerInfinibandDomain": {"type": "integer", "default": 100, "minimum": 1, "maximum": 300}})
def infiniband_domain(args: ResourceValidationArgs, report: ReportViolation, config: Config) -> None:
    if tags(args.props).get(INFINIBAND_TAG) != "true":
        return
    limit = int(config["maxVmsPerInfinibandDomain"])
    if get(args.props, "virtualMachineProfile", "networkProfile", "interconnectGroupProfile"):
        # An NVLink rack: InfiniBand spans its interconnect group, which places the VMs; Azure answers Microsoft's
        # example of such a set with singlePlacementGroup false (docs/rack-scale.md).
        if get(args.props, "singlePlacementGroup") is True:
            report("singlePlacementGroup is true on an interconnect scale set: its interconnect group places it", None)
        if len(zones(args.props)) != 1:
            report(f"zones is {zones(args.props)}: a rack scale set sits in exactly one zone", None)
        return
    if get(args.props, "singlePlacementGroup") is not True:
        report("singlePlacementGroup is not true: InfiniBand connects only the VMs of one placement group", None)
    if get(args.props, "orchestrationMode", default="Uniform") != "Uniform":
        report("orchestrationMode is not Uniform: InfiniBand scale sets must be Uniform", None)
    count = int(get(args.props, "sku", "capacity", default=0))
    if count > limit:
        report(f"{count} VMs exceed the InfiniBand domain limit of {limit}", None)
    if len(zones(args.props)) != 1:
        report(f"zones is {zones(args.props)}: an InfiniBand scale set sits in exactly one zone", None)


@resource_rule(
    "azure-native-compute-virtualmachinescaleset-accelerated-networking", types=(SCALE_SET,), severity=Severity.MEDIUM,
    description="GPU, CPU and system pool NICs use accelerated networking (SR-IOV): pod traffic and NCCL's TCP "
                "bootstrap otherwise go through the host's virtual switch.",
    remediation="Leave the pool's acceleratedNetworking at its default or pick a size that supports it; confidential "
                "pools are exempt (NCCads sizes do not offer it).")
def accelerated_networking(args: ResourceValidationArgs, report: ReportViolation, _: Config) -> None:
    if role(args.props) not in NODE_ROLES_WITH_AN:
        return
    for nic in nic_configs(args.props):
        if get(nic, "enableAcceleratedNetworking") is not True:
            report(f"NIC {get(nic, 'name')} has enableAcceleratedNetworking off", None)


@resource_rule(
    "azure-native-compute-virtualmachinescaleset-confidential-vm", types=(SCALE_SET,), severity=Severity.CRITICAL,
    description="Confidential-GPU pools are confidential VMs: securityType ConfidentialVM, secure boot and vTPM on, "
                "and a confidential OS-disk encryption type; otherwise the GPU's CC mode protects nothing.",
    remediation="Declare the pool with kind: confidential (the component sets these); do not override securityProfile.",
    config={"allowedEncryptionTypes": {"type": "array", "items": {"type": "string", "enum": ENCRYPTION_TYPES},
                                       "default": ENCRYPTION_TYPES, "minItems": 1}})
def confidential_vm(args: ResourceValidationArgs, report: ReportViolation, config: Config) -> None:
    if role(args.props) != "confidential":
        return
    profile = get(args.props, "virtualMachineProfile", default={})
    if get(profile, "securityProfile", "securityType") != "ConfidentialVM":
        report("securityProfile.securityType is not ConfidentialVM", None)
    for setting in ("secureBootEnabled", "vTpmEnabled"):
        if get(profile, "securityProfile", "uefiSettings", setting) is not True:
            report(f"securityProfile.uefiSettings.{setting} is not true", None)
    encryption = get(profile, "storageProfile", "osDisk", "managedDisk", "securityProfile", "securityEncryptionType")
    allowed = list(config["allowedEncryptionTypes"])
    if encryption not in allowed:
        report(f"OS disk securityEncryptionType is {encryption!r}; expected one of {', '.join(allowed)}", None)


@resource_rule(
    "azure-native-compute-virtualmachine-etcd-protected", types=(VIRTUAL_MACHINE,), severity=Severity.CRITICAL,
    description="etcd and events-etcd VMs are protected: a replacement wipes a member's data, and two at once lose "
                "quorum and the cluster's state.",
    remediation="Keep protect=True on etcd members; replace one through the member-replacement runbook.")
def etcd_protected(args: ResourceValidationArgs, report: ReportViolation, _: Config) -> None:
    if role(args.props) in ETCD_ROLES and not args.opts.protect:
        report(f"{role(args.props)} member is not protected", None)


def _custom_data(args: ResourceValidationArgs) -> object:
    if kind(args) == SCALE_SET:
        return get(args.props, "virtualMachineProfile", "osProfile", "customData")
    return get(args.props, "osProfile", "customData")


@resource_rule(
    "azure-native-compute-machines-bootstrap-data-secret", types=MACHINE_TYPES, severity=Severity.CRITICAL,
    description="Machine customData (bootstrap tokens, etcd and API-server private keys) is a Pulumi secret, so it "
                "is encrypted in state and masked in previews.",
    remediation="Wrap customData in pulumi.Output.secret(...) (the components do).",
    config={"secretsMasked": {"type": "boolean", "default": False,
                              "description": "True when props come from a preview document, where secrets are masked."}})
def bootstrap_data_secret(args: ResourceValidationArgs, report: ReportViolation, config: Config) -> None:
    value = _custom_data(args)
    if value is None:
        return
    if not config["secretsMasked"]:
        # The engine hands policies secrets in plain text without marking them (pulumi/pulumi-policy#241).
        args.not_applicable("secretness is only visible in a preview document: run `gpucluster check` on it")
    if value != SECRET_MARK:
        report("customData is not a secret: bootstrap credentials would be stored and shown in plain text", None)


@resource_rule(
    "azure-native-compute-virtualmachinescaleset-infiniband-image-pinned", types=(SCALE_SET,), severity=Severity.HIGH,
    description="An InfiniBand scale set boots a pinned image version: with `latest` (or a gallery image without a "
                "version) a scale-out boots a newer build beside the running VMs, and one domain mixes driver and "
                "OFED builds that NCCL jobs across it depend on.",
    remediation="Pin the pool's image.version (the catalogue images are pinned); roll a new version by reimaging the "
                "whole domain.")
def infiniband_image_pinned(args: ResourceValidationArgs, report: ReportViolation, _: Config) -> None:
    if tags(args.props).get(INFINIBAND_TAG) != "true":
        return
    image = get(args.props, "virtualMachineProfile", "storageProfile", "imageReference", default={})
    image_id = get(image, "id") or get(image, "sharedGalleryImageId") or get(image, "communityGalleryImageId")
    if image_id:
        if "/versions/" not in str(image_id).lower():
            report(f"image {image_id} names no version: each VM boots the gallery's latest", None)
        return
    version = get(image, "version")
    if not version or str(version).lower() == "latest":
        report(f"image version is {version or 'unset'}: a scale-out may boot a newer build than the running VMs", None)


RULES = [require_machine_tags, no_overprovision, capacity_left_to_autoscaler, infiniband_domain,
         accelerated_networking, confidential_vm, etcd_protected, bootstrap_data_secret, infiniband_image_pinned]
