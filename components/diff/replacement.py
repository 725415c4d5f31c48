"""Which input changes a provider turns into a replacement, and which Azure refuses on a resource that exists.

The providers decide, not this file; each rule names where its provider says so:

- azure-native (pulumi/pulumi-azure-native `provider/pkg/provider/diff.go`, calculateDetailedDiff): every
  parameter of the resource's PUT path (resource group, the resource's own name, its parents' names)
  replaces; so do body properties the generator marked ForceNew (`provider/pkg/gen/properties.go`: a
  top-level property whose `x-ms-mutability` has `create` but not `update`, and the per-resource list in
  `provider/pkg/gen/replacement.go`). A create-only property nested in a type does not replace.
- kubernetes (pulumi/pulumi-kubernetes `provider/pkg/provider/diff.go`, forceNew): `.metadata.name` and
  `.metadata.namespace` on every kind, plus a per-kind list.
- command (pulumi/pulumi-command, `local.Command`): with no `update` command, as the library declares them, any
  changed input replaces the resource, running `create` again (SDK 1.2.1 `local/command.py`, `triggers`: "If the
  `update` command was provided the resource will be updated, otherwise it will be replaced using the `create`
  command").
- tls and random are bridged Terraform providers whose arguments are RequiresReplace
  (hashicorp/terraform-provider-tls `internal/provider/resource_*.go`; only `early_renewal_hours` updates).
- node scale sets' dynamic provider (components/azure/scale_set/provider.py) decides by
  `components/azure/scale_set/routes.py` scale_set_diff: what the update model lacks, the resource id, zones and sku
  replace; capacity never changes anything.

"Refused" changes are ones the provider sends as an in-place update that Azure rejects on an existing
resource: the update fails mid-`pulumi up`. The plan refuses them instead (with a base plan) and names the
procedure to follow.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from gpucluster.azure.scale_set.routes import scale_set_diff
from gpucluster.policies.rules.props import DYNAMIC_RESOURCE, SCALE_SET, resource_kind

_AZ_DIFF = "pulumi-azure-native provider/pkg/provider/diff.go (PUT path parameters replace)"
_AZ_FORCE_NEW = "pulumi-azure-native provider/pkg/gen/replacement.go (forceNewMap)"
_COMPUTE_LOCATION = ("azure-rest-api-specs Microsoft.Compute ComputeRP common Resource.location "
                     "x-ms-mutability [read, create] -> ForceNew (pulumi-azure-native gen/properties.go)")
_K8S = "pulumi-kubernetes provider/pkg/provider/diff.go (forceNew)"
_TLS = "terraform-provider-tls internal/provider/resource_*.go (RequiresReplace)"
_COMMAND = "pulumi-command local.Command without `update`: a changed input replaces it (SDK 1.2.1 local/command.py)"
_RANDOM = "terraform-provider-random internal/provider/resource_*.go (RequiresReplace; `keepers` among them)"

# PUT path parameters as the SDK names them, per azure-native type (module:Kind).
_PATH_PARAMETERS: dict[str, tuple[str, ...]] = {
    "resources:ResourceGroup": ("resourceGroupName",),
    "network:VirtualNetwork": ("resourceGroupName", "virtualNetworkName"),
    "network:Subnet": ("resourceGroupName", "virtualNetworkName", "subnetName"),
    "network:NetworkSecurityGroup": ("resourceGroupName", "networkSecurityGroupName"),
    "network:NetworkInterface": ("resourceGroupName", "networkInterfaceName"),
    "network:NatGateway": ("resourceGroupName", "natGatewayName"),
    "network:PublicIPPrefix": ("resourceGroupName", "publicIpPrefixName"),
    "network:LoadBalancer": ("resourceGroupName", "loadBalancerName"),
    "network:VirtualNetworkPeering": ("resourceGroupName", "virtualNetworkName", "virtualNetworkPeeringName"),
    "compute:VirtualMachine": ("resourceGroupName", "vmName"),
    "compute:VirtualMachineScaleSet": ("resourceGroupName", "vmScaleSetName"),
    "compute:DiskEncryptionSet": ("resourceGroupName", "diskEncryptionSetName"),
    "storage:StorageAccount": ("resourceGroupName", "accountName"),
    "storage:BlobContainer": ("resourceGroupName", "accountName", "containerName"),
    "managedidentity:UserAssignedIdentity": ("resourceGroupName", "resourceName"),
    "authorization:RoleAssignment": ("scope", "roleAssignmentName"),
    "keyvault:Vault": ("resourceGroupName", "vaultName"),
    "keyvault:Key": ("resourceGroupName", "vaultName", "keyName"),
    "compute:Gallery": ("resourceGroupName", "galleryName"),
    "compute:GalleryImage": ("resourceGroupName", "galleryName", "galleryImageName"),
    "virtualmachineimages:VirtualMachineImageTemplate": ("resourceGroupName", "imageTemplateName"),
    "containerregistry:AgentPool": ("resourceGroupName", "registryName", "agentPoolName"),
}

# Body properties that replace: forceNewMap entries and create-only top-level properties.
_FORCE_NEW: dict[str, tuple[tuple[str, str], ...]] = {
    "resources:ResourceGroup": (("location", _AZ_FORCE_NEW),),
    "network:VirtualNetwork": (("location", _AZ_FORCE_NEW),),
    "storage:StorageAccount": (("location", _AZ_FORCE_NEW), ("isHnsEnabled", _AZ_FORCE_NEW)),
    "authorization:RoleAssignment": (("principalId", _AZ_FORCE_NEW),),
    "compute:VirtualMachine": (("location", _COMPUTE_LOCATION),),
    "compute:VirtualMachineScaleSet": (("location", _COMPUTE_LOCATION),),
}


@dataclass(frozen=True)
class Refusal:
    prefix: str
    why: str
    procedure: str


_VM_ZONE = Refusal(
    "zones", "Azure does not move an existing VM or scale set to another zone (the update fails)",
    "keep the zone; to move a member, add a new one in the target zone and remove the old one, one at a time "
    "(docs/operations.md, \"Moving an etcd member\")")
_VM_OS_PROFILE = Refusal(
    "osProfile", "Azure refuses osProfile changes on an existing VM (\"some of the settings cannot be changed once "
    "VM is provisioned\", azure-rest-api-specs ComputeRP virtualMachine.json OSProfile)",
    "leave the stack's value as the VMs were created with, rotate SSH keys on the running VMs "
    "(az vm user update), or replace the members one at a time (docs/operations.md, \"Replacing an etcd member\")")

_VM_IMAGE = Refusal(
    "storageProfile.imageReference", "Azure refuses to change an existing VM's image (PropertyChangeNotAllowed: "
    "\"Changing property 'imageReference' is not allowed\", pulumi/pulumi-azure-native#1117)",
    "keep the VM's image (etcd members ignore it); to move a member to a new image, replace it "
    "(docs/operations.md, \"Replacing an etcd member\")")
_VMSS_IMAGE_IDENTITY = tuple(Refusal(
    f"virtualMachineProfile.storageProfile.imageReference.{key}",
    f"Azure refuses to change a scale set's image {key} (\"Changing property 'imageReference.{key}' is not allowed\", "
    "MicrosoftDocs/azure-docs#50063); only the version may change",
    "put the new image in a new pool, move the workloads, then remove the old pool") for key in ("publisher", "offer", "sku"))
_IMAGE_TEMPLATE = tuple(Refusal(
    key, "Image Builder refuses to change an image template (\"Conflict. Details: Update/Upgrade of image templates is "
    "currently not supported\", azure-compute-docs articles/virtual-machines/linux/image-builder-troubleshoot.md), and "
    "the version it distributed already exists in the gallery: a version is built once",
    "name a new version for the changed bake: cluster.images.<definition>.version (docs/images.md, \"Building an "
    "image\")") for key in ("customize", "source", "distribute"))
_DAEMONSET_SELECTOR = Refusal(
    "spec.selector", "a DaemonSet's selector is immutable (kube-apiserver ValidateDaemonSetUpdate), and "
    "pulumi-kubernetes' forceNew table lists the kind as `Daemonset`, so the change is sent as an update",
    "declare the DaemonSet under a new name and delete the old one")

REFUSED: dict[str, tuple[Refusal, ...]] = {
    "azure-native:compute:VirtualMachine": (_VM_ZONE, _VM_OS_PROFILE, _VM_IMAGE),
    "azure-native:compute:VirtualMachineScaleSet": (_VM_ZONE, *_VMSS_IMAGE_IDENTITY),
    "azure-native:virtualmachineimages:VirtualMachineImageTemplate": _IMAGE_TEMPLATE,
    "kubernetes:apps/v1:DaemonSet": (_DAEMONSET_SELECTOR,),
}

# kubernetes: group -> kind -> replacing paths (relative to the object, without the leading dot).
_SELECTOR = ("spec.selector",)
_K8S_KINDS: dict[str, dict[str, tuple[str, ...]]] = {
    "apps": {"Deployment": _SELECTOR,
             "StatefulSet": ("spec.podManagementPolicy", "spec.revisionHistoryLimit", "spec.selector",
                             "spec.serviceName", "spec.volumeClaimTemplates")},
    "core": {"ConfigMap": ("binaryData", "data"), "Secret": ("type", "stringData", "data"),
             "Service": ("spec.clusterIP",), "ResourceQuota": ("spec.scopes",),
             "PersistentVolumeClaim": ("spec",)},
    "rbac.authorization.k8s.io": {"ClusterRoleBinding": ("roleRef",), "RoleBinding": ("roleRef",)},
    "storage.k8s.io": {"StorageClass": ("parameters", "provisioner")},
    "batch": {"Job": ("spec.completions", "spec.parallelism", "spec.selector", "spec.template")},
}


def _under(path: str, prefix: str) -> bool:
    return path == prefix or path.startswith(prefix + ".") or path.startswith(prefix + "[")


def _k8s_group_kind(resource_type: str) -> tuple[str, str]:
    """`kubernetes:apps/v1:Deployment` -> (apps, Deployment); `kubernetes:core/v1:ConfigMap` -> (core, ...)."""
    _, group_version, kind = resource_type.split(":", 2)
    group = group_version.rsplit("/", 1)[0] if "/" in group_version else "core"
    return group, kind


def replacing(resource_type: str, path: str) -> str | None:
    """The source saying a change at `path` (dotted, `[i]` for list items) replaces the resource, else None."""
    provider = resource_type.split(":", 1)[0]
    if provider == "azure-native":
        module_kind = resource_type.split(":", 1)[1]
        top = re.split(r"[.\[]", path, maxsplit=1)[0]
        if top in _PATH_PARAMETERS.get(module_kind, ()) or (
                module_kind not in _PATH_PARAMETERS and (top == "resourceGroupName" or top.endswith("Name"))):
            return _AZ_DIFF
        return next((source for key, source in _FORCE_NEW.get(module_kind, ()) if top == key), None)
    if provider == "kubernetes":
        if resource_type.startswith(("kubernetes:helm.sh/", "kubernetes:yaml/")):
            return None
        if _under(path, "metadata.name") or _under(path, "metadata.namespace"):
            return _K8S
        group, kind = _k8s_group_kind(resource_type)
        if any(_under(path, p) for p in _K8S_KINDS.get(group, {}).get(kind, ())):
            return _K8S
        return None
    if provider == "tls":
        return None if path.startswith("earlyRenewalHours") else _TLS
    if provider == "random":
        return _RANDOM
    if provider == "command":
        return _COMMAND
    return None


_ROUTE = "NodeScaleSet provider, components/azure/scale_set/routes.py"


def replacements(resource_type: str, paths: list[str], old_inputs: dict[str, Any],
                 new_inputs: dict[str, Any]) -> list[tuple[str, str]]:
    """(path, source) for each changed path that replaces the resource, as its provider decides."""
    if resource_type == DYNAMIC_RESOURCE and resource_kind(resource_type, new_inputs) == SCALE_SET:
        _, replacing_paths = scale_set_diff(old_inputs, new_inputs)
        return [(p, f"{why}; {_ROUTE}") for p, why in sorted(replacing_paths.items()) if p in paths]
    return [(p, source) for p in paths if (source := replacing(resource_type, p)) is not None]


def refused(resource_type: str, path: str) -> Refusal | None:
    return next((r for r in REFUSED.get(resource_type, ()) if _under(path, r.prefix)), None)
