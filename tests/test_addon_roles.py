"""The add-ons' Azure roles fit the calls they make.

Two lists meet here: every ARM request each add-on makes (components/catalog/arm_operations.py: cluster-autoscaler
and Cilium as read at their source, our prefix IPAM controller read from its own source) and Azure's operations list
(MicrosoftDocs/azure-docs `articles/role-based-access-control/permissions/{compute,networking,identity}.md`, the rows
in tests/data/azure_rbac_operations.md). Every request's action, and every action its linked access checks need,
must be an Azure operation and be granted at the request's scope; every granted action must be needed by some
request. A request the role lacks is a 403 at run time; a granted action no request needs is privilege for nothing.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import pytest

from gpucluster.agents import kube_client, prefix_ipam
from gpucluster.catalog import arm_operations
from gpucluster.catalog.addon_permissions import ADDON_PERMISSIONS, Permission
from gpucluster.catalog.arm_operations import ArmOperation, operations_for, prefix_ipam_operations, rbac_action

DATA = Path(__file__).resolve().parent / "data"
OLD_VMSS_NIC_ACTION = "Microsoft.Compute/virtualMachineScaleSets/virtualMachines/networkInterfaces/read"
"""The per-VM action the prefix IPAM role held: the controller lists a whole scale set's NICs, which needs
`Microsoft.Compute/virtualMachineScaleSets/networkInterfaces/read` instead (a 403 at every sync)."""


def azure_operations() -> set[str]:
    rows = (DATA / "azure_rbac_operations.md").read_text().splitlines()
    return {line.split("|")[1].strip() for line in rows if line.startswith("| Microsoft.")}


def role_problems(granted: dict[str, tuple[Permission, ...]], operations: dict[str, tuple[ArmOperation, ...]],
                  known: set[str]) -> list[str]:
    # A request path's casing is not always its action's: the SDK posts `.../manualupgrade` (azure-mgmt-compute
    # 39.0.0 operations/_operations.py) for the action Microsoft's list spells `manualUpgrade/action`. A derived
    # action is named as the list spells it; the grant must use that spelling.
    spelled = {action.lower(): action for action in known}
    problems = []
    for addon, permissions in sorted(granted.items()):
        needed: dict[tuple[str, str], str] = {}
        for op in operations[addon]:
            needed.setdefault((spelled.get(op.action.lower(), op.action), op.scope), f"{op.method} {op.path}")
            for linked in op.linked:
                needed.setdefault((spelled.get(linked.action.lower(), linked.action), linked.scope),
                                  f"linked check of {op.method} {op.path}")
        has = {(p.action, p.scope) for p in permissions}
        for (action, scope), why in sorted(needed.items()):
            if action not in known:
                problems.append(f"{addon}: {action} ({why}) is not an Azure operation")
            if (action, scope) not in has:
                problems.append(f"{addon}: {action} at {scope} is not granted but {why} needs it")
        for action, scope in sorted(has - set(needed)):
            problems.append(f"{addon}: {action} at {scope} is granted but no request needs it")
        problems += [f"{addon}: granted {a} is not an Azure operation" for a, _ in sorted(has) if a not in known]
    return problems


def test_the_vendored_list_is_azures() -> None:
    known = azure_operations()
    assert len(known) > 30
    assert "Microsoft.Compute/virtualMachineScaleSets/networkInterfaces/read" in known
    assert OLD_VMSS_NIC_ACTION in known  # a real operation, for one VM's NICs: not the scale-set list


def test_every_request_maps_to_a_granted_azure_operation_and_nothing_else_is_granted() -> None:
    operations = {addon: operations_for(addon) for addon in ADDON_PERMISSIONS}
    assert role_problems(ADDON_PERMISSIONS, operations, azure_operations()) == []


def test_the_per_vm_nic_action_fails_the_prefix_ipam_role() -> None:
    """The role as it was: the controller's scale-set NIC list has no grant, and the per-VM grant has no request."""
    wrong = {**ADDON_PERMISSIONS, "prefix-ipam": (Permission(OLD_VMSS_NIC_ACTION, "resourceGroup", "as before"),)}
    operations = {addon: operations_for(addon) for addon in wrong}
    problems = role_problems(wrong, operations, azure_operations())
    assert problems == [
        "prefix-ipam: Microsoft.Compute/virtualMachineScaleSets/networkInterfaces/read at resourceGroup is not granted "
        f"but GET {operations['prefix-ipam'][0].path} needs it",
        f"prefix-ipam: {OLD_VMSS_NIC_ACTION} at resourceGroup is granted but no request needs it"]


def test_cilium_without_the_scale_set_nic_list_or_the_identity_assign_fails() -> None:
    for dropped in ("Microsoft.Compute/virtualMachineScaleSets/networkInterfaces/read",
                    "Microsoft.ManagedIdentity/userAssignedIdentities/assign/action"):
        cni = tuple(p for p in ADDON_PERMISSIONS["cni"] if p.action != dropped)
        problems = role_problems({"cni": cni}, {"cni": operations_for("cni")}, azure_operations())
        assert len(problems) == 1 and problems[0].startswith(f"cni: {dropped} at resourceGroup is not granted")


def test_an_unknown_action_is_caught() -> None:
    typo = (*ADDON_PERMISSIONS["autoscaler"], Permission("Microsoft.Compute/virtualMachineScaleSet/read", "resourceGroup", ""))
    problems = role_problems({"autoscaler": typo}, {"autoscaler": operations_for("autoscaler")}, azure_operations())
    assert "autoscaler: granted Microsoft.Compute/virtualMachineScaleSet/read is not an Azure operation" in problems


@pytest.mark.parametrize(("method", "path", "action"), [
    ("GET", "/subscriptions/s/resourceGroups/g/providers/Microsoft.Compute/virtualMachineScaleSets/v/networkInterfaces",
     "Microsoft.Compute/virtualMachineScaleSets/networkInterfaces/read"),
    ("GET", "/subscriptions/s/resourceGroups/g/providers/Microsoft.Compute/virtualMachineScaleSets/v/virtualMachines/0"
     "/networkInterfaces", "Microsoft.Compute/virtualMachineScaleSets/virtualMachines/networkInterfaces/read"),
    ("PUT", "/subscriptions/s/resourceGroups/g/providers/Microsoft.Compute/virtualMachineScaleSets/v/virtualMachines/0",
     "Microsoft.Compute/virtualMachineScaleSets/virtualMachines/write"),
    ("POST", "/subscriptions/s/resourceGroups/g/providers/Microsoft.Compute/virtualMachineScaleSets/v/delete",
     "Microsoft.Compute/virtualMachineScaleSets/delete/action"),
    ("GET", "/subscriptions/s/providers/Microsoft.Network/virtualNetworks", "Microsoft.Network/virtualNetworks/read"),
    ("GET", "/subscriptions/s/resourceGroups/g/providers/Microsoft.Network/virtualNetworks/n/subnets/x?api-version=1",
     "Microsoft.Network/virtualNetworks/subnets/read"),
])
def test_an_action_follows_from_method_and_path(method: str, path: str, action: str) -> None:
    assert rbac_action(method, path) == action


def test_prefix_ipam_requests_are_read_from_its_source(tmp_path: Path) -> None:
    [op] = prefix_ipam_operations()
    assert (op.method, op.scope) == ("GET", "resourceGroup")
    assert op.path == ("/subscriptions/{sub}/resourceGroups/{rg}/providers/Microsoft.Compute/virtualMachineScaleSets/"
                       "{scale_set}/networkInterfaces")
    # A new ARM call in the controller shows up without anyone listing it by hand.
    script = tmp_path / "prefix_ipam.py"
    script.write_text(arm_operations.PREFIX_IPAM_SCRIPT.read_text() + (
        "\n\ndef _vnet(sub: str) -> None:\n"
        "    urllib.request.Request(f\"{ARM}/subscriptions/{sub}/providers/Microsoft.Network/virtualNetworks\")\n"))
    assert sorted(o.action for o in prefix_ipam_operations(script)) == [
        "Microsoft.Compute/virtualMachineScaleSets/networkInterfaces/read", "Microsoft.Network/virtualNetworks/read"]
    script.write_text(script.read_text().replace("Microsoft.Network/virtualNetworks\")",
                                                 "Microsoft.Network/virtualNetworks\", data=b\"{}\")"))
    with pytest.raises(ValueError, match="not a plain GET"):
        prefix_ipam_operations(script)


PORT: list[int] = [0]


class _FakeAzure(BaseHTTPRequestHandler):
    """IMDS and ARM on one loopback server; records every ARM request (method, path without query)."""

    requests: list[tuple[str, str]] = []

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        if path.startswith("/metadata/identity/oauth2/token"):
            body: dict[str, Any] = {"access_token": "token"}
        else:
            self.requests.append(("GET", path))
            page = 1 if "page=2" not in self.path else 2
            body = json.loads((DATA / "prefix_ipam" / f"vmss_nics_page{page}.json").read_text())
            if page == 1:
                body["nextLink"] = f"http://127.0.0.1:{PORT[0]}{path}?page=2"
            else:
                body.pop("nextLink", None)
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def fake_azure(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[str, str]]]:
    server = HTTPServer(("127.0.0.1", 0), _FakeAzure)
    _FakeAzure.requests = []
    PORT[0] = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    monkeypatch.setattr(prefix_ipam, "ARM", base)
    monkeypatch.setattr(prefix_ipam, "IMDS_TOKEN", f"{base}/metadata/identity/oauth2/token")
    try:
        yield _FakeAzure.requests
    finally:
        server.shutdown()
        server.server_close()


def test_the_controller_sends_only_the_requests_read_from_its_source(fake_azure: list[tuple[str, str]]) -> None:
    arm = prefix_ipam.Arm("client", kube_client.Http(), prefix_ipam.Settings())
    nics = list(arm.list_nics("sub-1", "rg-1", "h100-z1-00"))
    assert nics and len(fake_azure) == 2  # both pages
    [op] = prefix_ipam_operations()
    template = re.compile("^" + re.sub(r"\\\{[^}]+\\\}", "[^/]+", re.escape(op.path)) + "$")
    for method, path in fake_azure:
        assert method == op.method and template.match(path), path
        assert rbac_action(method, path) in {p.action for p in ADDON_PERMISSIONS["prefix-ipam"]}


def test_docs_list_every_grant_and_every_request() -> None:
    text = (Path(__file__).resolve().parent.parent / "docs" / "azure-preflight.md").read_text()
    for addon, permissions in ADDON_PERMISSIONS.items():
        for p in permissions:
            assert f"| {addon} | `{p.action}` | {p.scope} | {p.call} |" in text, (addon, p.action)
        for op in operations_for(addon):
            assert f"| {addon} | `{op.method} {op.path}` | `{op.action}` | {op.call} |" in text, (addon, op.path)
