"""Rules on VMs and scale sets that no type checker sees: placement groups, disks, NICs, confidential settings."""

from __future__ import annotations

from typing import Any

from gpucluster.azure.scale_set.routes import PREFIX_ON_NIC_COMPUTE_API, api_version_at_least
from gpucluster.catalog.vm_sizes import VmSize
from gpucluster.preflight.model import Context, Finding, Resource, dig, listed
from gpucluster.vocabulary import INFINIBAND_TAG

VMSS = "azure-native:compute:VirtualMachineScaleSet"
VM = "azure-native:compute:VirtualMachine"
DES = "azure-native:compute:DiskEncryptionSet"
NIC = "azure-native:network:NetworkInterface"
CONFIDENTIAL_DES_TYPE = "ConfidentialVmEncryptedWithCustomerKey"


def size_of(resource: Resource) -> str | None:
    """The VM size a VM or scale set asks for."""
    value = dig(resource.inputs, "sku", "name") if resource.type == VMSS else dig(
        resource.inputs, "hardwareProfile", "vmSize")
    return value if isinstance(value, str) else None


def _profile(resource: Resource) -> dict[str, Any]:
    """The part holding storage, network, security and OS profiles (the VM itself, or the scale set's VM model)."""
    profile = resource.inputs.get("virtualMachineProfile") if resource.type == VMSS else resource.inputs
    return profile if isinstance(profile, dict) else {}


def _nic_configs(resource: Resource) -> list[tuple[str, dict[str, Any]]]:
    """(field path, NIC config) pairs with inline IP configurations (scale sets)."""
    configs = listed(dig(_profile(resource), "networkProfile", "networkInterfaceConfigurations"))
    return [(f"virtualMachineProfile.networkProfile.networkInterfaceConfigurations[{i}]", c)
            for i, c in enumerate(configs) if isinstance(c, dict)]


def _placement(resource: Resource, ctx: Context) -> list[Finding]:
    findings = []
    spg = resource.inputs.get("singlePlacementGroup")
    capacity = dig(resource.inputs, "sku", "capacity")
    interconnect = bool(dig(_profile(resource), "networkProfile", "interconnectGroupProfile"))
    # An interconnect set's InfiniBand spans its interconnect group, not a placement group
    # (components/preflight/interconnect.py has its own placement rule).
    if dig(resource.inputs, "tags", INFINIBAND_TAG) == "true" and spg is not True and not interconnect:
        findings.append(Finding("infiniband-single-placement-group", resource.name, "singlePlacementGroup",
                                "an InfiniBand scale set needs singlePlacementGroup: true (VMs in different placement "
                                "groups get no InfiniBand between them); set it true and keep the set within one domain"))
    if isinstance(capacity, int):
        limit = ctx.max_single_placement_group if spg is not False else ctx.max_large_scale_set
        if capacity > limit:
            findings.append(Finding("placement-group-capacity", resource.name, "sku.capacity",
                                    f"{capacity} VMs exceed the {limit} a scale set with singlePlacementGroup: "
                                    f"{'true' if spg is not False else 'false'} holds; split it into more scale sets "
                                    "or raise the limit under cluster.limits with its ticket"))
    return findings


def _fault_domains(resource: Resource) -> list[Finding]:
    """Max spreading (platformFaultDomainCount 1) with a single placement group. Where the request leaves either
    out, Azure's default applies: zonal Uniform sets default to 1 fault domain and (API 2017-12-01 on) multiple
    placement groups; regional ones to 5 and a single placement group."""
    if resource.inputs.get("orchestrationMode", "Uniform") != "Uniform":
        return []
    zonal = bool(resource.inputs.get("zones"))
    spg, fds = resource.inputs.get("singlePlacementGroup"), resource.inputs.get("platformFaultDomainCount")
    spg = spg if isinstance(spg, bool) else not zonal
    fds = fds if isinstance(fds, int) else 1 if zonal else 5
    if not (spg and fds == 1):
        return []
    return [Finding("fault-domains-placement-group", resource.name, "platformFaultDomainCount",
                    "platformFaultDomainCount 1 (max spreading) needs multiple placement groups, and this set keeps a "
                    "single one (singlePlacementGroup true, as an InfiniBand set must); set platformFaultDomainCount "
                    "5 (fixed spreading; a zonal Uniform set takes 1 or 5), or singlePlacementGroup false where no "
                    "InfiniBand is needed")]


def _os_disk(resource: Resource, size: VmSize, ctx: Context, warnings: list[Finding]) -> list[Finding]:
    field = ("virtualMachineProfile." if resource.type == VMSS else "") + "storageProfile.osDisk"
    disk = dig(_profile(resource), "storageProfile", "osDisk")
    if not isinstance(disk, dict) or dig(disk, "diffDiskSettings", "option") != "Local":
        return []
    findings = []
    placement = dig(disk, "diffDiskSettings", "placement") or "CacheDisk"
    if disk.get("caching") != "ReadOnly":
        findings.append(Finding("ephemeral-os-disk", resource.name, f"{field}.caching",
                                f"an ephemeral OS disk takes ReadOnly caching, not {disk.get('caching')!r}; set ReadOnly"))
    if placement != "ResourceDisk":
        warnings.append(Finding.warning("ephemeral-os-disk-placement", resource.name, f"{field}.diffDiskSettings.placement",
                                f"{placement} placement is not checked (no cache/NVMe sizes catalogued); "
                                f"confirm {size.name} offers it"))
        return findings
    wanted = disk.get("diskSizeGB")
    if size.temp_disk_gib == 0:
        findings.append(Finding("ephemeral-os-disk", resource.name, f"{field}.diffDiskSettings",
                                f"{size.name} has no resource disk for an ephemeral OS disk; use a managed OS disk"))
    elif isinstance(wanted, int) and wanted > size.temp_disk_gib:
        findings.append(Finding("ephemeral-os-disk", resource.name, f"{field}.diskSizeGB",
                                f"{wanted} GiB does not fit {size.name}'s {size.temp_disk_gib} GiB resource disk; "
                                f"ask for at most {size.temp_disk_gib} GiB or use a managed OS disk"))
    return findings


def _network(resource: Resource, size: VmSize, ctx: Context) -> list[Finding]:
    findings = []
    given = dig(_profile(resource), "networkProfile", "networkInterfaceConfigurations")
    if given is not None and not isinstance(given, list):
        findings.append(Finding("nic-configurations-shape", resource.name,
                                "virtualMachineProfile.networkProfile.networkInterfaceConfigurations",
                                f"is {type(given).__name__} {str(given)[:40]!r}, and ARM takes a list of NIC "
                                "configurations: give a list"))
    configs = _nic_configs(resource)
    if len(configs) > size.max_nics:
        findings.append(Finding("nics-per-size", resource.name, "virtualMachineProfile.networkProfile",
                                f"{len(configs)} NICs; {size.name} takes at most {size.max_nics}: remove some"))
    for path, config in configs:
        if config.get("enableAcceleratedNetworking") is True and not size.accelerated_networking:
            findings.append(Finding("accelerated-networking", resource.name, f"{path}.enableAcceleratedNetworking",
                                    f"{size.name} does not support accelerated networking; set it false"))
        ips = listed(config.get("ipConfigurations"))
        if len(ips) > ctx.max_ip_configurations_per_nic:
            findings.append(Finding("ip-configurations-per-nic", resource.name, f"{path}.ipConfigurations",
                                    f"{len(ips)} IP configurations; a NIC takes at most "
                                    f"{ctx.max_ip_configurations_per_nic}: lower podsPerNode"))
    return findings


def _vm_nics(resource: Resource, size: VmSize, nics: dict[str, Resource], ctx: Context) -> list[Finding]:
    """A VM's NICs are their own resources: check them against the VM's size."""
    refs = listed(dig(resource.inputs, "networkProfile", "networkInterfaces"))
    findings = []
    if len(refs) > size.max_nics:
        findings.append(Finding("nics-per-size", resource.name, "networkProfile.networkInterfaces",
                                f"{len(refs)} NICs; {size.name} takes at most {size.max_nics}: remove some"))
    for ref in refs:
        nic = nics.get(str(dig(ref, "id") or "").rsplit("/", 1)[-1].lower())
        if nic is None:
            continue
        if nic.inputs.get("enableAcceleratedNetworking") is True and not size.accelerated_networking:
            findings.append(Finding("accelerated-networking", nic.name, "enableAcceleratedNetworking",
                                    f"the NIC of {resource.name} ({size.name}) cannot use accelerated networking; "
                                    "set it false"))
    return findings


def check_nics(resources: list[Resource], ctx: Context) -> list[Finding]:
    return [Finding("ip-configurations-per-nic", r.name, "ipConfigurations",
                    f"{len(listed(r.inputs.get('ipConfigurations')))} IP configurations; a NIC takes at most "
                    f"{ctx.max_ip_configurations_per_nic}: use fewer")
            for r in resources if r.type == NIC
            and len(listed(r.inputs.get("ipConfigurations"))) > ctx.max_ip_configurations_per_nic]


def _confidential(resource: Resource, size: VmSize, sets: dict[str, Resource]) -> list[Finding]:
    prefix = "virtualMachineProfile." if resource.type == VMSS else ""
    profile = _profile(resource)
    security_type = dig(profile, "securityProfile", "securityType")
    disk_security = dig(profile, "storageProfile", "osDisk", "managedDisk", "securityProfile")
    findings = []
    if (security_type == "ConfidentialVM") != size.confidential:
        wanted = "ConfidentialVM" if size.confidential else "no ConfidentialVM security type"
        findings.append(Finding("confidential-size", resource.name, f"{prefix}securityProfile.securityType",
                                f"{size.name} needs {wanted}, got {security_type!r}; match the size and the security type"))
    encryption = dig(disk_security, "securityEncryptionType")
    if encryption is not None and (security_type != "ConfidentialVM"
                                   or dig(profile, "securityProfile", "uefiSettings", "vTpmEnabled") is not True):
        findings.append(Finding("confidential-encryption", resource.name,
                                f"{prefix}storageProfile.osDisk.managedDisk.securityProfile.securityEncryptionType",
                                f"{encryption} needs securityType ConfidentialVM with vTpmEnabled: true; set both or "
                                "remove the encryption type"))
    des_id = dig(disk_security, "diskEncryptionSet", "id")
    if isinstance(des_id, str) and des_id:
        des = sets.get(des_id.rsplit("/", 1)[-1].lower())
        confidential_set = des is None or des.inputs.get("encryptionType") == CONFIDENTIAL_DES_TYPE
        if confidential_set and encryption != "DiskWithVMGuestState":
            findings.append(Finding("confidential-customer-key", resource.name,
                                    f"{prefix}storageProfile.osDisk.managedDisk.securityProfile.securityEncryptionType",
                                    f"a customer-managed key (confidential disk encryption set) works only with "
                                    f"DiskWithVMGuestState, not {encryption!r}; set DiskWithVMGuestState"))
    return findings


def _prefix_on_nic(resource: Resource) -> list[Finding]:
    """A scale set whose IP configurations ask for /28 blocks must be declared through a route that sends the
    field: a dynamic resource at Microsoft.Compute PREFIX_ON_NIC_COMPUTE_API or later. azure-native's typed
    class builds its request body from its own schema (pulumi-azure-native provider/pkg/convert/
    sdkInputsToRequestBody.go), which in 3.29 lacks the field: Azure would get single addresses."""
    if api_version_at_least(resource.api_version, PREFIX_ON_NIC_COMPUTE_API):
        return []
    route = (f"{resource.declared_type} at api-version {resource.api_version}" if resource.declared_type else
             f"azure-native's typed {resource.short_type}, whose schema lacks the field and drops it from the body")
    findings = []
    for path, config in _nic_configs(resource):
        blocks = [ip for ip in listed(config.get("ipConfigurations")) if isinstance(ip, dict)
                  and (ip.get("privateIPAddressPrefixLength") or dig(ip, "properties", "privateIPAddressPrefixLength"))]
        if blocks:
            findings.append(Finding(
                "prefix-on-nic-api-version", resource.name, f"{path}.ipConfigurations",
                f"{len(blocks)} IP configurations ask for /28 blocks (privateIPAddressPrefixLength), which scale sets "
                f"take from Microsoft.Compute {PREFIX_ON_NIC_COMPUTE_API}; this one is declared through {route}: "
                "Azure would allocate single addresses. Declare it through NodeScaleSet "
                "(components/azure/scale_set/resource.py), or set the pool's podAddresses to secondaryIps"))
    return findings


def check_machines(resources: list[Resource], ctx: Context, warnings: list[Finding]) -> list[Finding]:
    findings: list[Finding] = []
    sets = {str(r.inputs.get("diskEncryptionSetName", "")).lower(): r for r in resources if r.type == DES}
    nics = {str(r.inputs.get("networkInterfaceName", "")).lower(): r for r in resources if r.type == NIC}
    for resource in resources:
        if resource.type not in (VMSS, VM):
            continue
        if resource.type == VMSS:
            findings += _placement(resource, ctx)
            findings += _fault_domains(resource)
            findings += _prefix_on_nic(resource)
        name = size_of(resource)
        size = ctx.sizes.get(name) if name else None
        if size is None:
            continue
        findings += _os_disk(resource, size, ctx, warnings)
        findings += _network(resource, size, ctx) if resource.type == VMSS else _vm_nics(resource, size, nics, ctx)
        findings += _confidential(resource, size, sets)
    return findings
