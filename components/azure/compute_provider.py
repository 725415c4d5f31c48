"""What the dynamic providers on Microsoft's SDK share: how they reach ARM (components/azure/scale_set_provider.py,
interconnect_block_provider.py)."""

from __future__ import annotations

from typing import Any

from pulumi.dynamic import ResourceProvider

ARM_ENDPOINT = "https://management.azure.com"


class ComputeProvider(ResourceProvider):
    """A provider that talks to Microsoft.Compute through azure-mgmt-compute. `endpoint`, `credential` and
    `connection_verify` point it at a stand-in server in tests; at deploy time it signs in with
    azure-identity's DefaultAzureCredential."""

    serialize_as_secret_always = False  # holds no secret: credentials are found at run time

    def __init__(self, endpoint: str | None = None, credential: Any = None, connection_verify: str | bool = True,
                 polling_interval: float | None = None) -> None:
        super().__init__()
        self.endpoint = endpoint
        self.credential = credential
        self.connection_verify = connection_verify
        self.polling_interval = polling_interval

    # The SDK client, built per call (the provider process is short-lived and the pickle must stay small).
    def _client(self, subscription: str) -> Any:
        from azure.mgmt.compute import ComputeManagementClient

        credential = self.credential
        if credential is None:
            from azure.identity import DefaultAzureCredential

            credential = DefaultAzureCredential()
        options: dict[str, Any] = {"connection_verify": self.connection_verify}
        if self.polling_interval is not None:
            options["polling_interval"] = self.polling_interval
        return ComputeManagementClient(credential, subscription, base_url=self.endpoint or ARM_ENDPOINT, **options)
