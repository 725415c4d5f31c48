"""Every ARM request an in-cluster add-on makes, as its source makes it, and the Azure RBAC action each needs.

The action of a request follows from its method and path (Azure RBAC permission strings are
`{Company}.{ProviderName}/{resourceType}/{action}`, MicrosoftDocs/azure-docs
`articles/role-based-access-control/permissions/compute.md`): the provider namespace after the last `providers/`,
the resource types on the path with their names dropped, then `read` for GET, `write` for PUT and PATCH, `delete`
for DELETE, and for a POST to `.../{name}/<verb>` the `<verb>/action`. So listing every NIC of a scale set
(`GET .../virtualMachineScaleSets/{vmss}/networkInterfaces`) is `Microsoft.Compute/virtualMachineScaleSets/
networkInterfaces/read`, and listing one scale-set VM's NICs is `.../virtualMachines/networkInterfaces/read`.

A write can also need actions on the resources its body references (ARM's linked access check, error
`LinkedAuthorizationFailed`): those are listed with each operation, with the evidence.

Sources, by add-on:
- cluster-autoscaler `ARM_VM_TYPE=vmss` (components/kubernetes/objects/autoscaler.py), read at the tag of the
  version the cluster runs (kubernetes/autoscaler tag cluster-autoscaler-1.36.1, `cluster-autoscaler/cloudprovider/
  azure/`). Flexible scale sets (`ListVmssFlexVMsWithOutInstanceView`), SKU listing (`skuClient`, only with
  `AZURE_ENABLE_DYNAMIC_INSTANCE_LIST`), deployments (vmType standard) and AKS agent pools are not reached here.
- Cilium's Azure IPAM operator (`ipam: azure`, secondary IPs). The cluster runs Cilium 1.20.3; its tag could not be
  read here. Read instead: cilium/cilium `pkg/azure/api/api.go` and `pkg/azure/ipam/instances.go` as stored in the
  public code index at a revision after PR #41555 ("Replace subscription-wide VNet enumeration with targeted subnet
  queries", reviewed 2025-10-21: `VirtualNetworks.ListAll` became `Subnets.Get` per subnet in use) and before
  PR #46192 (2026-05-26, which keeps the per-VM NIC list and drops a duplicate call). PR #37430 (2025-02) added the
  per-instance resync that lists one VM's NICs. Public IP prefixes (`publicIpTags`) are not configured here, and
  standalone-VM NIC writes (`Interfaces.CreateOrUpdate`) are not reached (every node is in a scale set).
- Our prefix IPAM controller (agents/prefix_ipam.py): its requests are read from its own
  source (`prefix_ipam_operations`), not written here by hand.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

Scope = Literal["resourceGroup", "network", "subscription", "gallery"]
"""Where a grant sits: the cluster's resource group, the subscription, or the cluster's Compute Gallery (the node
images every scale set boots)."""

RG = "/subscriptions/{subscriptionId}/resourceGroups/{resourceGroupName}"
VMSS = f"{RG}/providers/Microsoft.Compute/virtualMachineScaleSets"

SUBNET_JOIN = "Microsoft.Network/virtualNetworks/subnets/join/action"
IDENTITY_ASSIGN = "Microsoft.ManagedIdentity/userAssignedIdentities/assign/action"
GALLERY_IMAGE_READ = "Microsoft.Compute/galleries/images/versions/read"


@dataclass(frozen=True)
class Linked:
    """An action ARM checks on a resource the request's body (or the model it acts on) references."""

    action: str
    scope: Scope
    why: str


@dataclass(frozen=True)
class ArmOperation:
    method: str
    path: str
    """The request's path template, as the REST specs name the parameters."""
    call: str
    """The SDK call and the function of the add-on's source that makes it."""
    linked: tuple[Linked, ...] = ()

    @property
    def action(self) -> str:
        return rbac_action(self.method, self.path)

    @property
    def scope(self) -> Scope:
        if "/virtualNetworks/" in self.path:
            return "network"
        return "resourceGroup" if "/resourceGroups/" in self.path else "subscription"


def rbac_action(method: str, path: str) -> str:
    """The Azure RBAC action a request needs (see the module docstring for the rule)."""
    segments = [s for s in path.split("?", 1)[0].split("/") if s]
    lowered = [s.lower() for s in segments]
    if "providers" not in lowered:
        raise ValueError(f"{path}: not a provider resource path")
    at = len(lowered) - 1 - lowered[::-1].index("providers")
    namespace, rest = segments[at + 1], segments[at + 2:]
    verb = method.upper()
    if verb == "POST":
        *rest, posted = rest
        suffix = f"{posted}/action"
    else:
        suffix = {"GET": "read", "HEAD": "read", "PUT": "write", "PATCH": "write", "DELETE": "delete"}[verb]
    types = rest[0::2]
    if not types or any(t.startswith("{") for t in types):
        raise ValueError(f"{method} {path}: resource types and names do not alternate")
    return "/".join([namespace, *types, suffix])


_SUBNET_JOIN_WHY = ("the IP configurations reference the pool subnet (azure-docs virtual-network-manage-subnet.md, "
                    "permissions: subnets/join/action to create resources in a subnet)")
_SCALE_OUT_WHY = ("scale-out creates NICs in the subnet the scale-set model names, though the capacity body names "
                  "no subnet: the autoscaler's writes failed with LinkedAuthorizationFailed until it held join rights "
                  "on the worker subnet (Azure/aks-engine#2367, #2373)")
_IDENTITY_WHY = ("the full VM body sent back carries the user-assigned identities of the system pool's VMs; ARM "
                 "checks assign/action on every identity a VM or scale-set write carries, not only new ones "
                 "(Azure/aad-pod-identity#339: a VM CreateOrUpdate listing all the VM's identities as linked scopes)")
_SCALE_OUT_IDENTITY_WHY = ("scale-out of the system pool creates VMs that carry the add-on identities its model "
                           "names; inferred from the subnet case above (no public report shows this one)")

_GALLERY_WHY = ("every node scale set boots a Compute Gallery image version (storageProfile.imageReference.id); ARM "
                "checks read on it for any write to the scale set or its VMs, a capacity-only write included: "
                "LinkedAuthorizationFailed naming Microsoft.Compute/galleries/images/versions/read on a scale-set "
                "CreateOrUpdate (Azure/aad-pod-identity#752) and on a scale-set VM update (Azure/azure-cli#15594)")

_CA = "kubernetes/autoscaler cluster-autoscaler-1.36.1 cluster-autoscaler/cloudprovider/azure/"
AUTOSCALER_SOURCE = _CA

AUTOSCALER: tuple[ArmOperation, ...] = (
    ArmOperation("GET", VMSS, f"virtualMachineScaleSetsClient.List ({_CA}azure_cache.go fetchScaleSets)"),
    ArmOperation("GET", f"{RG}/providers/Microsoft.Compute/virtualMachines",
                 f"virtualMachinesClient.List ({_CA}azure_cache.go fetchVirtualMachines, every refresh)"),
    ArmOperation("GET", f"{VMSS}/{{vmScaleSetName}}",
                 f"virtualMachineScaleSetsClient.Get ({_CA}azure_scale_set.go getCurSize, "
                 "retryCreateOrUpdateWithFreshETag)"),
    ArmOperation("GET", f"{VMSS}/{{virtualMachineScaleSetName}}/virtualMachines?$expand=instanceView",
                 f"virtualMachineScaleSetVMsClient.ListVMInstanceView ({_CA}azure_scale_set.go GetScaleSetVms)"),
    ArmOperation("PUT", f"{VMSS}/{{vmScaleSetName}}",
                 f"BeginCreateOrUpdate of {{name, location, sku}} ({_CA}azure_scale_set.go initCreateOrUpdate, "
                 "buildScaleSetCapacityUpdate; azure_vmss_delete_client.go)",
                 (Linked(SUBNET_JOIN, "network", _SCALE_OUT_WHY),
                  Linked(IDENTITY_ASSIGN, "resourceGroup", _SCALE_OUT_IDENTITY_WHY),
                  Linked(GALLERY_IMAGE_READ, "gallery", _GALLERY_WHY))),
    ArmOperation("POST", f"{VMSS}/{{vmScaleSetName}}/delete",
                 f"BeginDeleteInstances ({_CA}azure_scale_set.go DeleteInstances, azure_force_delete_scale_set.go)"),
)

_CCM = "kubernetes-sigs/cloud-provider-azure v1.36.5 pkg/provider/"

NODE_LIFECYCLE: tuple[ArmOperation, ...] = (
    ArmOperation("GET", VMSS, f"VirtualMachineScaleSetClient.List ({_CCM}azure_vmss_cache.go)"),
    ArmOperation("GET", f"{VMSS}/{{virtualMachineScaleSetName}}/virtualMachines?$expand=instanceView",
                 f"VirtualMachineScaleSetVMClient.List/ListVMInstanceView ({_CCM}azure_vmss.go: InstanceExists, "
                 "InstanceShutdown)"),
)

_CILIUM = "cilium/cilium pkg/azure/api/api.go"
CILIUM_SOURCE = (f"{_CILIUM}, pkg/azure/ipam/instances.go (after PR #41555, before PR #46192; the v1.20.3 tag "
                 "was not readable here)")

CILIUM: tuple[ArmOperation, ...] = (
    ArmOperation("GET", VMSS, f"VirtualMachineScaleSetsClient.NewListPager ({_CILIUM} listVirtualMachineScaleSets)"),
    ArmOperation("GET", f"{VMSS}/{{virtualMachineScaleSetName}}/networkInterfaces",
                 f"InterfacesClient.NewListVirtualMachineScaleSetNetworkInterfacesPager ({_CILIUM} "
                 "listVirtualMachineScaleSetNetworkInterfaces, every full resync)"),
    ArmOperation("GET", f"{VMSS}/{{virtualMachineScaleSetName}}/virtualMachines/{{virtualmachineIndex}}"
                 "/networkInterfaces",
                 f"InterfacesClient.NewListVirtualMachineScaleSetVMNetworkInterfacesPager ({_CILIUM} "
                 "listVirtualMachineScaleSetVMNetworkInterfaces, each per-instance resync, PR #37430)"),
    ArmOperation("GET", f"{RG}/providers/Microsoft.Network/networkInterfaces",
                 f"InterfacesClient.NewListPager ({_CILIUM} vmNetworkInterfaces, every full resync)"),
    ArmOperation("GET", f"{RG}/providers/Microsoft.Network/virtualNetworks/{{virtualNetworkName}}/subnets/{{subnetName}}",
                 f"SubnetsClient.Get ({_CILIUM} getSubnetWithPagination, per subnet in use, PR #41555)"),
    ArmOperation("GET", f"{VMSS}/{{virtualMachineScaleSetName}}/virtualMachines/{{instanceId}}",
                 f"VirtualMachineScaleSetVMsClient.Get ({_CILIUM} AssignPrivateIpAddressesVMSS)"),
    ArmOperation("PUT", f"{VMSS}/{{virtualMachineScaleSetName}}/virtualMachines/{{instanceId}}",
                 f"VirtualMachineScaleSetVMsClient.BeginUpdate of the whole VM ({_CILIUM} "
                 "AssignPrivateIpAddressesVMSS)",
                 (Linked(SUBNET_JOIN, "network", _SUBNET_JOIN_WHY),
                  Linked(IDENTITY_ASSIGN, "resourceGroup", _IDENTITY_WHY),
                  Linked(GALLERY_IMAGE_READ, "gallery", _GALLERY_WHY))),
)

PREFIX_IPAM_SCRIPT = Path(__file__).resolve().parent.parent / "agents" / "prefix_ipam.py"
PREFIX_IPAM_SOURCE = "agents/prefix_ipam.py"


def prefix_ipam_operations(script: Path = PREFIX_IPAM_SCRIPT) -> tuple[ArmOperation, ...]:
    """The ARM requests the prefix IPAM controller builds, read from its source: every f-string that starts with
    the module's `ARM` endpoint is one request path; a `urllib.request.Request` without `data` or `method` is a GET.
    The controller's only other HTTP calls go to IMDS (its token) and the Kubernetes API."""
    tree = ast.parse(script.read_text())
    found: dict[str, ArmOperation] = {}
    for function in (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)):
        templates = [_template(node) for node in ast.walk(function) if isinstance(node, ast.JoinedStr)]
        templates = [t for t in templates if t is not None]
        if not templates:
            continue
        requests = [n for n in ast.walk(function) if isinstance(n, ast.Call) and _callee(n) == "Request"]
        if not requests or any(k.arg in ("data", "method") for r in requests for k in r.keywords) \
                or any(len(r.args) > 1 for r in requests):
            raise ValueError(f"{script.name} {function.name}: an ARM request that is not a plain GET; read it")
        # ast.walk visits an enclosing function before a nested one: the innermost name wins
        found.update({path: ArmOperation("GET", path, f"{function.name} ({PREFIX_IPAM_SOURCE})") for path in templates})
    return tuple(found.values())


ROLLOUT_SCRIPT = PREFIX_IPAM_SCRIPT.parent / "rollout_arm.py"
ROLLOUT_SOURCE = "agents/rollout_arm.py"


def rollout_operations(script: Path = ROLLOUT_SCRIPT) -> tuple[ArmOperation, ...]:
    """The ARM requests the rollout controller sends, read from its source: every `self._send(<method>,
    f"{ARM}/...")`. Its only other HTTP calls go to IMDS (its token) and the Kubernetes API."""
    tree = ast.parse(script.read_text())
    found: dict[tuple[str, str], ArmOperation] = {}
    for function in (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)):
        for call in (n for n in ast.walk(function) if isinstance(n, ast.Call) and _callee(n) == "_send"):
            method, url = [*call.args, None, None][:2]
            template = _template(url) if isinstance(url, ast.JoinedStr) else None
            if not (isinstance(method, ast.Constant) and isinstance(method.value, str)) or template is None:
                raise ValueError(f"{script.name} {function.name}: an ARM request not read as (method, f-string); read it")
            found[(method.value, template)] = ArmOperation(method.value, template, f"{function.name} ({ROLLOUT_SOURCE})")
    return tuple(found.values())


def _callee(call: ast.Call) -> str:
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def _template(node: ast.JoinedStr) -> str | None:
    """`f"{ARM}/subscriptions/{sub}/..."` as `/subscriptions/{sub}/...` (query dropped); None for other strings."""
    parts = node.values
    first = parts[0] if parts else None
    if not (isinstance(first, ast.FormattedValue) and isinstance(first.value, ast.Name) and first.value.id == "ARM"):
        return None
    text = "".join(p.value if isinstance(p, ast.Constant) and isinstance(p.value, str)
                   else "{" + ast.unparse(p.value) + "}" if isinstance(p, ast.FormattedValue) else ""
                   for p in parts[1:])
    return text.split("?", 1)[0]


def operations_for(addon: str) -> tuple[ArmOperation, ...]:
    """The requests of each add-on that holds an identity (components/catalog/addon_permissions.py)."""
    return {"autoscaler": AUTOSCALER, "cni": CILIUM, "prefix-ipam": prefix_ipam_operations(),
            "node-lifecycle": NODE_LIFECYCLE, "rollout": rollout_operations()}[addon]
