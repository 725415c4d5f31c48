"""Naming rules per resource type: length, characters, the scope a name must be unique in.

Rows follow Microsoft Learn "Naming rules and restrictions for Azure resources" (azure-docs
articles/azure-resource-manager/management/resource-name-rules.md; Microsoft.Network rows: 1-80 alphanumerics,
underscores, periods and hyphens, starting alphanumeric, ending alphanumeric or underscore; virtualNetworks 2-64).
Where the azure-native SDK (3.29, generated from the REST specs) states the rule, its words are quoted instead.
natGateways are not in that page's table; they take the Microsoft.Network rule every other network type has.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass
from typing import Literal

from gpucluster.catalog.autonaming import NAME_PROPERTIES, default_name
from gpucluster.catalog.preview_values import UNKNOWN, UNKNOWN_MARK
from gpucluster.preflight.model import Finding, Resource, dig

Scope = Literal["global", "subscription", "resourceGroup", "parent", "assignment"]

_NET = r"^[A-Za-z0-9](?:[A-Za-z0-9_.-]{0,78}[A-Za-z0-9_])?$"
_NET_TEXT = "1-80 letters, digits, `_`, `.`, `-`; start with a letter or digit, end with one or `_`"
_HOST_BAD = r'\\/"\[\]:|<>+=;,?*@&'
_GUID = r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"


@dataclass(frozen=True)
class NameRule:
    pattern: str
    text: str
    scope: Scope
    parent: str | None = None
    """For `parent` scope: the input naming the parent (a subnet's `virtualNetworkName`)."""

    def matches(self, name: str) -> bool:
        return re.fullmatch(self.pattern, name) is not None


NAMING: dict[str, NameRule] = {
    "azure-native:resources:ResourceGroup": NameRule(
        r"^[\w\-.()]{0,89}[\w\-()]$", "1-90 letters, digits, `_`, `-`, `.`, `(`, `)`; not ending in `.`", "subscription"),
    "azure-native:network:NetworkSecurityGroup": NameRule(_NET, _NET_TEXT, "resourceGroup"),
    "azure-native:network:PublicIPPrefix": NameRule(_NET, _NET_TEXT, "resourceGroup"),
    "azure-native:network:NatGateway": NameRule(_NET, _NET_TEXT, "resourceGroup"),
    "azure-native:network:LoadBalancer": NameRule(_NET, _NET_TEXT, "resourceGroup"),
    "azure-native:network:NetworkInterface": NameRule(_NET, _NET_TEXT, "resourceGroup"),
    # Not in the naming-rules page: the TypeSpec's key pattern (Azure/azure-rest-api-specs PR #42331, specification/
    # network/resource-manager/Microsoft.Network/Network/Network/InterconnectGroup.tsp: `^[^_\W][\w-._]{0,79}(?<![-.])$`).
    "azure-native:network:InterconnectGroup": NameRule(
        r"^[^_\W][\w\-._]{0,79}(?<![-.])$",
        "1-80 letters, digits, `_`, `-`, `.`; start with a letter or digit, not ending with `-` or `.`", "resourceGroup"),
    "azure-native:network:VirtualNetwork": NameRule(
        r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}[A-Za-z0-9_]$",
        "2-64 letters, digits, `_`, `.`, `-`; start with a letter or digit, end with one or `_`", "resourceGroup"),
    "azure-native:network:Subnet": NameRule(_NET, _NET_TEXT, "parent", "virtualNetworkName"),
    "azure-native:network:VirtualNetworkPeering": NameRule(_NET, _NET_TEXT, "parent", "virtualNetworkName"),
    "azure-native:storage:StorageAccount": NameRule(
        r"^[a-z0-9]{3,24}$", "3-24 lowercase letters and digits, unique across Azure", "global"),
    "azure-native:storage:BlobContainer": NameRule(
        r"^(?!.*--)[a-z0-9][a-z0-9-]{1,61}[a-z0-9]$",
        "3-63 lowercase letters, digits and `-`, every `-` between a letter or digit", "parent", "accountName"),
    "azure-native:compute:VirtualMachine": NameRule(
        rf"^(?!_)[^{_HOST_BAD}]{{0,63}}[^{_HOST_BAD}.\-]$",
        "1-64 characters (Linux), none of \\ / \" [ ] : | < > + = ; , ? * @ &; not starting with `_`, "
        "not ending with `.` or `-`", "resourceGroup"),
    "azure-native:compute:VirtualMachineScaleSet": NameRule(
        rf"^(?!_)[^{_HOST_BAD}]{{0,63}}[^{_HOST_BAD}.\-]$",
        "1-64 characters (Linux), none of \\ / \" [ ] : | < > + = ; , ? * @ &; not starting with `_`, "
        "not ending with `.` or `-`", "resourceGroup"),
    # InterconnectBlock.tsp declares no name pattern (`NamePattern = ""`); the rule is the one Microsoft.Compute
    # applies to the other names it takes as a path segment here (disk encryption sets): an assumption, kept narrow.
    "azure-native:compute:InterconnectBlock": NameRule(
        r"^[A-Za-z0-9_-]{1,80}$", "1-80 of a-z, A-Z, 0-9, `_` and `-`", "resourceGroup"),
    "azure-native:compute:DiskEncryptionSet": NameRule(
        r"^[A-Za-z0-9_-]{1,80}$", "1-80 of a-z, A-Z, 0-9, `_` and `-`", "resourceGroup"),
    "azure-native:compute:Gallery": NameRule(
        r"^[A-Za-z0-9](?:[A-Za-z0-9.]{0,78}[A-Za-z0-9])?$",
        "1-80 letters, digits and `.`, starting and ending with a letter or digit", "resourceGroup"),
    "azure-native:compute:GalleryImage": NameRule(
        r"^[A-Za-z0-9](?:[A-Za-z0-9_.-]{0,78}[A-Za-z0-9])?$",
        "1-80 letters, digits, `_`, `-` and `.`, starting and ending with a letter or digit", "parent", "galleryName"),
    # Not in the naming-rules page: the REST spec's path parameter (azure-rest-api-specs specification/imagebuilder/
    # resource-manager/Microsoft.VirtualMachineImages/stable/2024-02-01/imagebuilder.json, ImageTemplateNameParameter).
    "azure-native:virtualmachineimages:VirtualMachineImageTemplate": NameRule(
        r"^[A-Za-z0-9-_.]{1,64}$", "1-64 letters, digits, `-`, `_` and `.`", "resourceGroup"),
    "azure-native:keyvault:Vault": NameRule(
        r"^(?!.*--)[A-Za-z][A-Za-z0-9-]{1,22}[A-Za-z0-9]$",
        "3-24 letters, digits and `-`, starting with a letter, ending with a letter or digit, no `--`, "
        "unique across Azure", "global"),
    "azure-native:keyvault:Key": NameRule(r"^[A-Za-z0-9-]{1,127}$", "1-127 letters, digits and `-`", "parent",
                                          "vaultName"),
    # Azure/azure-rest-api-specs specification/monitor/resource-manager/Microsoft.Monitor/Accounts/stable/2023-04-03/
    # monitoringAccounts_API.json (the API version azure-native 3.x sends): `azureMonitorWorkspaceName` pattern.
    "azure-native:monitor:AzureMonitorWorkspace": NameRule(
        r"^(?!-)[a-zA-Z0-9-]+[^-]$", "letters, digits and `-`; not starting or ending with `-`", "resourceGroup"),
    # specification/alertsmanagement/resource-manager/Microsoft.AlertsManagement/PrometheusRuleGroups/stable/
    # 2023-03-01/PrometheusRuleGroups.json: `ruleGroupName` pattern.
    "azure-native:alertsmanagement:PrometheusRuleGroup": NameRule(
        r"^[^:@/#{}%&+*<>?]+$", "none of : @ / # { } % & + * < > ?", "resourceGroup"),
    # Action groups: no rule read for Microsoft.Insights/actionGroups; the library's group is autonamed from
    # `<cluster>-metrics-alerts`, and this check keeps names to letters, digits and `-`, inside any rule.
    "azure-native:monitor:ActionGroup": NameRule(
        r"^[A-Za-z0-9][A-Za-z0-9-]{0,127}$", "1-128 letters, digits and `-`, starting with a letter or digit",
        "resourceGroup"),
    "azure-native:managedidentity:UserAssignedIdentity": NameRule(
        r"^[A-Za-z0-9][A-Za-z0-9_-]{2,127}$", "3-128 letters, digits, `-`, `_`, starting with a letter or digit",
        "resourceGroup"),
    # Microsoft.ContainerRegistry: registries 5-50 alphanumerics, global (resource-name-rules.md). Cache rules and
    # credential sets are not in that page; the ContainerRegistry REST spec's name parameters take 5-50 of
    # letters, digits and `-` (as recalled from azure-rest-api-specs; not re-read here).
    "azure-native:containerregistry:Registry": NameRule(
        r"^[A-Za-z0-9]{5,50}$", "5-50 letters and digits, unique across Azure", "global"),
    "azure-native:containerregistry:CacheRule": NameRule(
        r"^[A-Za-z0-9-]{5,50}$", "5-50 letters, digits and `-`", "parent", "registryName"),
    "azure-native:containerregistry:CredentialSet": NameRule(
        r"^[A-Za-z0-9-]{5,50}$", "5-50 letters, digits and `-`", "parent", "registryName"),
    # Agent pools: no published rule (resource-name-rules.md has no agentPools row, and Azure/bicep-types-az
    # generated/containerregistry/.../2019-06-01-preview/types.json at 0fc9ddde gives `name` no pattern); the
    # library's one pool is `agents`, letters only, inside any rule; this check keeps to letters, digits and `-`.
    "azure-native:containerregistry:AgentPool": NameRule(
        r"^[A-Za-z0-9-]{3,50}$", "3-50 letters, digits and `-`", "parent", "registryName"),
    # privateEndpoints and their zone groups are not in the page's table: the Microsoft.Network rule.
    "azure-native:network:PrivateEndpoint": NameRule(_NET, _NET_TEXT, "resourceGroup"),
    "azure-native:network:PrivateDnsZoneGroup": NameRule(_NET, _NET_TEXT, "parent", "privateEndpointName"),
    "azure-native:privatedns:PrivateZone": NameRule(
        r"^(?=.{1,63}$)[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+){1,33}$",
        "1-63 characters, 2-34 labels of letters, digits, `_` and `-` separated by `.`", "resourceGroup"),
    "azure-native:privatedns:VirtualNetworkLink": NameRule(_NET, _NET_TEXT, "parent", "privateZoneName"),
    "azure-native:authorization:RoleAssignment": NameRule(_GUID, "a GUID", "assignment"),
    "azure-native:authorization:RoleDefinition": NameRule(_GUID, "a GUID", "assignment"),
}


def _scope_key(resource: Resource, rule: NameRule) -> str:
    inputs = resource.inputs
    if rule.scope == "global":
        return ""
    if rule.scope == "subscription":
        return "subscription"
    if rule.scope == "assignment":
        return str(inputs.get("scope", ""))
    group = str(inputs.get("resourceGroupName", ""))
    if rule.scope == "parent" and rule.parent:
        return f"{group}/{inputs.get(rule.parent, '')}"
    return group


def check_names(resources: list[Resource]) -> list[Finding]:
    findings: list[Finding] = []
    seen: dict[tuple[str, str, str], list[str]] = defaultdict(list)
    for resource in resources:
        rule = NAMING.get(resource.type)
        prop = NAME_PROPERTIES.get(resource.type, (None,))[0]
        if rule is None or prop is None:
            findings.append(Finding("name-type-catalogued", resource.name, "type",
                                    f"{resource.type} has no naming rule; add it to components/preflight/naming.py "
                                    "and components/catalog/autonaming.py with its source"))
            continue
        name = resource.inputs.get(prop)
        if not isinstance(name, str) or name in (UNKNOWN, UNKNOWN_MARK):
            continue  # unknown until apply (pulumi's sentinel, or the offline engine's mark): nothing to judge
        if not rule.matches(name):
            findings.append(Finding("name-format", resource.name, prop,
                                    f"{name!r} ({len(name)} characters) breaks {resource.short_type}'s rule: {rule.text}; "
                                    f"set {prop} explicitly to a name that fits"))
        if rule.scope == "global" and name == default_name(resource.type, resource.urn, resource.name):
            findings.append(Finding("name-global-explicit", resource.name, prop,
                                    f"{name!r} is azure-native's autoname; names unique across Azure must be set from "
                                    "the stack (components/planning/azure_names.py)"))
        key = (resource.type, _scope_key(resource, rule), name.lower())
        seen[key].append(resource.name)
    for (typ, scope, name), owners in seen.items():
        if len(owners) > 1:
            where = "across Azure" if not scope else f"in {scope}"
            findings.append(Finding("name-unique", owners[1], NAME_PROPERTIES[typ][0],
                                    f"{name!r} is also the name of {owners[0]} ({typ.split(':', 1)[-1]}) {where}; "
                                    "give each its own name"))
    return findings


def check_computer_names(resources: list[Resource]) -> list[Finding]:
    findings = []
    for resource in resources:
        prefix = dig(resource.inputs, "virtualMachineProfile", "osProfile", "computerNamePrefix")
        if isinstance(prefix, str) and not 1 <= len(prefix) <= 58:
            findings.append(Finding("computer-name", resource.name, "virtualMachineProfile.osProfile.computerNamePrefix",
                                    f"{prefix!r} has {len(prefix)} characters; a Linux scale set's prefix takes at "
                                    "most 58 (64 minus the 6-character instance suffix): shorten it"))
        host = dig(resource.inputs, "osProfile", "computerName")
        if isinstance(host, str) and not 1 <= len(host) <= 64:
            findings.append(Finding("computer-name", resource.name, "osProfile.computerName",
                                    f"{host!r} has {len(host)} characters; a Linux host name takes at most 64: "
                                    "shorten it"))
    return findings
