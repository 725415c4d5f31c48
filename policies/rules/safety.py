"""Safety rules on single resources: tags, public exposure, scale-set settings."""

from __future__ import annotations

from pulumi_policy import (
    EnforcementLevel,
    PolicyConfigSchema,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    Severity,
)

from .props import MACHINE_TYPES, get, items, nic_configs

REQUIRED_TAGS = ("gpucluster-cluster", "gpucluster-role", "gpucluster-pool")
ROLES = ("system", "cpu", "gpu", "confidential", "apiserver", "etcd", "etcd-events")
SCALE_SET = "azure-native:compute:VirtualMachineScaleSet"


def _require_tags(args: ResourceValidationArgs, report: ReportViolation) -> None:
    if args.resource_type not in MACHINE_TYPES:
        return
    tags = get(args.props, "tags", default={}) or {}
    missing = [t for t in REQUIRED_TAGS if not tags.get(t)]
    if missing:
        report(f"missing tags {', '.join(missing)}", None)
    elif tags["gpucluster-role"] not in ROLES:
        report(f"gpucluster-role is {tags['gpucluster-role']!r}; expected one of {', '.join(ROLES)}", None)


require_machine_tags = ResourceValidationPolicy(
    name="azure-native-compute-machines-require-tags",
    description="Scale sets and VMs carry gpucluster-cluster, gpucluster-role and gpucluster-pool.",
    validate=_require_tags,
    enforcement_level=EnforcementLevel.MANDATORY,
    severity=Severity.MEDIUM,
    remediation_steps="Build machines through the gpucluster components, which set the tags, or add them.",
)


def _no_public_ip(args: ResourceValidationArgs, report: ReportViolation) -> None:
    if args.resource_type == SCALE_SET:
        for nic in nic_configs(args.props):
            for ip in items(get(nic, "ipConfigurations")):
                if get(ip, "publicIPAddressConfiguration") is not None:
                    report(f"NIC {get(nic, 'name')} ip configuration {get(ip, 'name')} has a public IP", None)
    elif args.resource_type == "azure-native:network:NetworkInterface":
        for ip in items(get(args.props, "ipConfigurations")):
            if get(ip, "publicIPAddress") is not None:
                report(f"ip configuration {get(ip, 'name')} has a public IP", None)
    elif args.resource_type == "azure-native:network:PublicIPAddress":
        report("a standalone public IP address; nodes and the control plane reach out through the NAT gateway", None)


no_public_ips = ResourceValidationPolicy(
    name="azure-native-network-machines-no-public-ip",
    description="No public IP on nodes or the control plane; egress goes through the NAT gateway.",
    validate=_no_public_ip,
    enforcement_level=EnforcementLevel.MANDATORY,
    severity=Severity.HIGH,
    remediation_steps="Remove publicIPAddressConfiguration / the PublicIPAddress; reach nodes through the hub.",
)


def _no_internet_inbound(args: ResourceValidationArgs, report: ReportViolation) -> None:
    if args.resource_type != "azure-native:network:NetworkSecurityGroup":
        return
    for rule in items(get(args.props, "securityRules")):
        if get(rule, "access") != "Allow" or get(rule, "direction") != "Inbound":
            continue
        sources = [get(rule, "sourceAddressPrefix"), *items(get(rule, "sourceAddressPrefixes"))]
        if any(s in ("*", "Internet", "0.0.0.0/0", "Any") for s in sources):
            report(f"rule {get(rule, 'name')} allows inbound traffic from the internet", None)


no_internet_inbound = ResourceValidationPolicy(
    name="azure-native-network-networksecuritygroup-no-internet-inbound",
    description="No NSG rule lets the internet in.",
    validate=_no_internet_inbound,
    enforcement_level=EnforcementLevel.MANDATORY,
    severity=Severity.CRITICAL,
    remediation_steps="Restrict the rule's source to cluster.network.adminCidrs or a VNet range.",
)


def _no_overprovision(args: ResourceValidationArgs, report: ReportViolation) -> None:
    if args.resource_type == SCALE_SET and get(args.props, "overprovision") is not False:
        report("overprovision is not false: Azure would start extra VMs that try to join the cluster", None)


no_overprovision = ResourceValidationPolicy(
    name="azure-native-compute-virtualmachinescaleset-no-overprovision",
    description="Node scale sets set overprovision: false (extra VMs would join the cluster).",
    validate=_no_overprovision,
    enforcement_level=EnforcementLevel.MANDATORY,
    severity=Severity.HIGH,
    remediation_steps="Set overprovision=False on the scale set.",
)


def _capacity_ignored(args: ResourceValidationArgs, report: ReportViolation) -> None:
    if args.resource_type != SCALE_SET:
        return
    tags = get(args.props, "tags", default={}) or {}
    if tags.get("cluster-autoscaler-enabled") == "true" and "sku.capacity" not in (args.opts.ignore_changes or []):
        report("the autoscaler owns sku.capacity but the program does not ignore changes to it", None)


capacity_left_to_autoscaler = ResourceValidationPolicy(
    name="azure-native-compute-virtualmachinescaleset-capacity-ignored",
    description="Scale sets the cluster autoscaler manages ignore changes to sku.capacity.",
    validate=_capacity_ignored,
    enforcement_level=EnforcementLevel.MANDATORY,
    severity=Severity.HIGH,
    remediation_steps="Add ignore_changes=['sku.capacity'] so `pulumi up` never resizes a pool under the autoscaler.",
)


def _infiniband_domain(args: ResourceValidationArgs, report: ReportViolation) -> None:
    if args.resource_type != SCALE_SET or get(args.props, "tags", "gpucluster-infiniband") != "true":
        return
    limit = int(args.get_config().get("maxVmsPerInfinibandDomain", 100))
    if get(args.props, "singlePlacementGroup") is not True:
        report("an InfiniBand scale set needs singlePlacementGroup: true (InfiniBand spans one placement group)", None)
    if get(args.props, "orchestrationMode", default="Uniform") != "Uniform":
        report("an InfiniBand scale set must use Uniform orchestration", None)
    capacity = get(args.props, "sku", "capacity", default=0) or 0
    if capacity > limit:
        report(f"{capacity} VMs exceed the InfiniBand domain limit of {limit}", None)
    if len(items(get(args.props, "zones"))) != 1:
        report("an InfiniBand scale set must sit in exactly one zone", None)


infiniband_domain = ResourceValidationPolicy(
    name="azure-native-compute-virtualmachinescaleset-infiniband-domain",
    description="InfiniBand scale sets are Uniform, singlePlacementGroup: true, zonal and within the domain limit.",
    validate=_infiniband_domain,
    enforcement_level=EnforcementLevel.MANDATORY,
    config_schema=PolicyConfigSchema(properties={
        "maxVmsPerInfinibandDomain": {"type": "integer", "default": 100, "minimum": 1, "maximum": 300}}),
    severity=Severity.HIGH,
    remediation_steps="Let the placement planner split the pool; raise maxVmsPerInfinibandDomain only with a ticket.",
)

POLICIES = [require_machine_tags, no_public_ips, no_internet_inbound, no_overprovision,
            capacity_left_to_autoscaler, infiniband_domain]
