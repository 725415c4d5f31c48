"""What the dynamic providers on Microsoft's SDK share: how they reach ARM (components/azure/scale_set/provider.py,
interconnect_block_provider.py).

Pulumi pickles the provider object into every resource's state (pulumi.dynamic `serialize_provider`, dill), in
plaintext: `serialize_as_secret_always = False` below, and the state is only encrypted where Pulumi marks a value
secret. So the provider holds nothing but where ARM is: a credential object passed in would be written into the
state of all 43 scale sets. It is refused; a credential is named by the import path of a factory instead
(`package.module:callable`, called at run time), and by default azure-identity's DefaultAzureCredential signs in.
"""

from __future__ import annotations

import importlib
from typing import Any

from pulumi.dynamic import ResourceProvider

ARM_ENDPOINT = "https://management.azure.com"


class CredentialInStateError(TypeError):
    """A credential object given to a provider that Pulumi would pickle into the state."""


def _factory(path: str) -> Any:
    module, _, name = path.partition(":")
    if not module or not name:
        raise ValueError(f"credential {path!r}: give the import path of a factory, `package.module:callable`")
    return getattr(importlib.import_module(module), name)


class ComputeProvider(ResourceProvider):
    """A provider that talks to Microsoft.Compute through azure-mgmt-compute. `endpoint`, `credential` (the import
    path of a credential factory), `connection_verify` and `polling_interval` point it at a stand-in server in tests;
    at deploy time it signs in with azure-identity's DefaultAzureCredential."""

    serialize_as_secret_always = False  # holds no secret: credentials are found at run time

    def __init__(self, endpoint: str | None = None, credential: str | None = None,
                 connection_verify: str | bool = True, polling_interval: float | None = None) -> None:
        super().__init__()
        if credential is not None and not isinstance(credential, str):
            raise CredentialInStateError(
                f"{type(self).__name__}: a {type(credential).__name__} object would be pickled into every resource's "
                "Pulumi state in plaintext; pass the import path of a factory (`package.module:callable`) or nothing "
                "(DefaultAzureCredential signs in at run time)")
        self.endpoint = endpoint
        self.credential = credential
        self.connection_verify = connection_verify
        self.polling_interval = polling_interval

    # The SDK client, built per call (the provider process is short-lived and the pickle must stay small).
    def _client(self, subscription: str) -> Any:
        from azure.mgmt.compute import ComputeManagementClient

        if self.credential is not None:
            credential = _factory(self.credential)()
        else:
            from azure.identity import DefaultAzureCredential

            credential = DefaultAzureCredential()
        options: dict[str, Any] = {"connection_verify": self.connection_verify}
        if self.polling_interval is not None:
            options["polling_interval"] = self.polling_interval
        return ComputeManagementClient(credential, subscription, base_url=self.endpoint or ARM_ENDPOINT, **options)


class NotOursError(RuntimeError):
    """A create found a resource of the same name that the stack cannot prove it owns."""


def check_owned(kind: str, resource_id: str, found: dict[str, Any], declared_tags: dict[str, Any],
                owner_tags: tuple[str, ...], delete_command: str) -> None:
    """A create that found `resource_id` taken (`found`: its wire body) adopts it only when it is what a create of
    this stack left behind: provisioningState Failed (ARM accepted the create, then allocation failed) and the tags
    this stack writes (`owner_tags`: the cluster, and the pool for a scale set) have the values it declares.
    Otherwise one line with the fix. A live one is never adopted: a replacement that creates before it deletes
    (an `aliases` move, `--target-replace`) would adopt its own predecessor and then see the engine delete it."""
    tags = found.get("tags") or {}
    state = (found.get("properties") or {}).get("provisioningState")
    wrong = [f"{tag}={tags.get(tag)!r} (this stack: {declared_tags.get(tag)!r})" for tag in owner_tags
             if tags.get(tag) is None or tags.get(tag) != declared_tags.get(tag)]
    if wrong:
        raise NotOursError(f"{kind} {resource_id} already exists and its tags do not name this cluster and resource "
                           f"({', '.join(wrong)}): delete it ({delete_command}), or import it with the `import_` "
                           "resource option, then run `pulumi up` again")
    if state != "Failed":
        raise NotOursError(f"{kind} {resource_id} already exists (provisioningState {state}) and is not in this "
                           f"stack's state: if it is this stack's, import it with the `import_` resource option "
                           f"(id {resource_id}), else delete it ({delete_command})")


def create_failed(kind: str, resource_id: str, error: Exception, delete_command: str) -> RuntimeError:
    """A long-running create that ARM accepted and then failed (AllocationFailed...): the resource stays in Azure."""
    reason = " ".join(str(error).split())[:300]
    return RuntimeError(f"{kind} {resource_id}: the create ARM accepted failed ({reason}); it is left in Azure, tagged "
                        f"for this stack: the next `pulumi up` adopts it and retries, or delete it ({delete_command})")
