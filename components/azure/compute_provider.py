"""What the dynamic providers on Microsoft's SDK share: how they reach ARM (components/azure/scale_set_provider.py,
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
