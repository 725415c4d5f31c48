"""Rules on network security rules, Key Vault keys, tags, zones, and where sizes are offered."""

from __future__ import annotations

from typing import Any

from gpucluster.catalog.preview_values import UNKNOWN, UNKNOWN_MARK
from gpucluster.planning.security_rules import is_address_prefix
from gpucluster.preflight.compute import VM, VMSS, size_of
from gpucluster.preflight.model import Context, Finding, Resource, dig
from gpucluster.spec.consumer_rules import MAX_TAG_NAME, MAX_TAG_NAME_STORAGE, MAX_TAG_VALUE, MAX_TAGS, TAG_NAME_FORBIDDEN


def _security_rules(resource: Resource) -> list[tuple[str, dict[str, Any]]]:
    if resource.type == "azure-native:network:SecurityRule":
        return [("", resource.inputs)]
    rules = resource.inputs.get("securityRules")
    return [(f"securityRules[{i}].", r) for i, r in enumerate(rules or []) if isinstance(r, dict)]


def check_security_rules(resources: list[Resource]) -> list[Finding]:
    findings = []
    for resource in resources:
        for path, rule in _security_rules(resource):
            for side in ("source", "destination"):
                plural = f"{side}AddressPrefixes"
                bad = [p for p in rule.get(plural) or [] if isinstance(p, str) and not is_address_prefix(p)]
                if bad:
                    findings.append(Finding(
                        "nsg-tag-in-plural-field", resource.name, f"{path}{plural}",
                        f"{', '.join(bad)} in rule {rule.get('name')!r}: the plural field takes CIDRs only; put one "
                        f"service tag or `*` in {side}AddressPrefix (one rule per tag)"))
    return findings


def check_keys(resources: list[Resource]) -> list[Finding]:
    vaults = {str(r.inputs.get("vaultName", "")).lower(): r for r in resources
              if r.type == "azure-native:keyvault:Vault"}
    findings = []
    for key in (r for r in resources if r.type == "azure-native:keyvault:Key"):
        kty = dig(key.inputs, "properties", "kty")
        vault = vaults.get(str(key.inputs.get("vaultName", "")).lower())
        sku = dig(vault.inputs, "properties", "sku", "name") if vault else None
        if isinstance(kty, str) and kty.endswith("-HSM") and vault is not None and str(sku).lower() != "premium":
            findings.append(Finding("key-vault-hsm-premium", key.name, "properties.kty",
                                    f"{kty} keys need a Premium vault; {vault.name} is {sku!r}: set its sku to premium"))
    return findings


def check_tags(resources: list[Resource]) -> list[Finding]:
    findings = []
    for resource in resources:
        tags = resource.inputs.get("tags")
        if not isinstance(tags, dict):
            continue
        if len(tags) > MAX_TAGS:
            findings.append(Finding("tags", resource.name, "tags",
                                    f"{len(tags)} tags; Azure takes at most {MAX_TAGS} per resource: drop some"))
        longest = MAX_TAG_NAME_STORAGE if resource.type == "azure-native:storage:StorageAccount" else MAX_TAG_NAME
        for name, value in tags.items():
            if len(name) > longest or TAG_NAME_FORBIDDEN & set(name):
                findings.append(Finding("tags", resource.name, f"tags[{name!r}]",
                                        f"tag names take at most {longest} characters and none of < > % & \\ ? /; "
                                        "rename it"))
            if isinstance(value, str) and len(value) > MAX_TAG_VALUE:
                findings.append(Finding("tags", resource.name, f"tags[{name!r}]",
                                        f"a tag value takes at most {MAX_TAG_VALUE} characters ({len(value)}): shorten it"))
    return findings


def _known(value: Any) -> bool:
    return not (isinstance(value, str) and value in (UNKNOWN, UNKNOWN_MARK))


def zone_list(value: Any) -> list[str]:
    """The zones a resource input names, as far as they are known: a computed (unknown) list, or an unknown
    entry in it, is judged at apply, not read as text (a string would otherwise be split into characters)."""
    if not isinstance(value, list):
        return []
    return [str(zone) for zone in value if _known(zone)]


def _zones(resource: Resource) -> list[tuple[str, list[str]]]:
    found = [("zones", zone_list(resource.inputs.get("zones")))]
    frontends = resource.inputs.get("frontendIPConfigurations")
    for i, frontend in enumerate(frontends if isinstance(frontends, list) else []):
        if isinstance(frontend, dict):
            found.append((f"frontendIPConfigurations[{i}].zones", zone_list(frontend.get("zones"))))
    return found


def check_placement(resources: list[Resource], ctx: Context, warnings: list[Finding]) -> list[Finding]:
    """Zones the region has; sizes in regions their availability row lists. Unknowns become warnings."""
    findings = []
    warned: set[tuple[str, str]] = set()
    for resource in resources:
        location = resource.inputs.get("location")
        if ctx.region_zones is not None:
            for field, zones in _zones(resource):
                for zone in zones:
                    if zone not in ctx.region_zones:
                        findings.append(Finding("zones", resource.name, field,
                                                f"zone {zone!r} does not exist in {location or ctx.location} (zones: "
                                                f"{', '.join(ctx.region_zones)}); use one of them"))
        if resource.type not in (VM, VMSS) or not isinstance(location, str):
            continue
        size = size_of(resource)
        if size is None:
            continue
        row = ctx.availability.get(size)
        field = "sku.name" if resource.type == VMSS else "hardwareProfile.vmSize"
        if row is None:
            if (size, "row") not in warned:
                warned.add((size, "row"))
                warnings.append(Finding.warning("size-region-uncatalogued", resource.name, field,
                                        f"no availability row for {size}: confirm `az vm list-skus -l {location} --size "
                                        f"{size}` and declare it under cluster.sizeRegions"))
            continue
        if not row.primary:
            if (size, f"secondary {location}") not in warned:
                warned.add((size, f"secondary {location}"))
                listed = "lists" if location in row.regions else "does not list"
                warnings.append(Finding.warning("size-region-secondary", resource.name, field,
                                        f"whether {location} offers {size} is not confirmed by Microsoft (its row "
                                        f"{listed} {location} on a source that is not Microsoft's, as of {row.as_of}: "
                                        "docs/azure-preflight.md \"Availability catalogue\"); confirm with `az vm "
                                        f"list-skus -l {location} --size {size}` and record it under cluster.sizeRegions"))
        elif location not in row.regions and not row.exhaustive:
            if (size, f"unlisted {location}") not in warned:
                warned.add((size, f"unlisted {location}"))
                warnings.append(Finding.warning("size-region-uncatalogued", resource.name, field,
                                        f"no availability row for {size} in {location} (its row confirms "
                                        f"{', '.join(row.regions)}: {row.source}, {row.as_of}); confirm `az vm "
                                        f"list-skus -l {location} --size {size}` and declare it under "
                                        "cluster.sizeRegions"))
            continue
        elif location not in row.regions:
            findings.append(Finding("size-region", resource.name, field,
                                    f"{size} is not offered in {location}; it is in {', '.join(row.regions)} "
                                    f"({row.source}, {row.as_of}): move the stack or the pool there, or confirm "
                                    "otherwise under cluster.sizeRegions with the source"))
            continue
        zones = zone_list(resource.inputs.get("zones"))
        known = (row.zones or {}).get(location)
        if known is None and zones and (size, "zones") not in warned:
            warned.add((size, "zones"))
            warnings.append(Finding.warning("size-zones-unknown", resource.name, "zones",
                                    f"which zones of {location} offer {size} is not established (logical zones differ "
                                    f"per subscription); check `az vm list-skus -l {location} --size {size} --zone`"))
        elif known is not None:
            missing = [z for z in zones if z not in known]
            if missing:
                findings.append(Finding("size-region", resource.name, "zones",
                                        f"{size} is not offered in zone(s) {', '.join(missing)} of {location} "
                                        f"(offered in {', '.join(known)}; {row.source}); use those zones"))
    return findings
