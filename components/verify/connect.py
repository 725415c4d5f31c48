"""Where verify reads from: the Azure subscription (credential, subscription id, ARM endpoint) and the cluster (a
kubeconfig). Missing or unusable input is a SpecError: one line, exit 2, before any check runs."""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from gpucluster.errors import SpecError

PUBLIC_ARM = "https://management.azure.com"
T = TypeVar("T")


@dataclass(frozen=True)
class AzureAccess:
    credential: Any
    """An azure-core TokenCredential (DefaultAzureCredential from the command line)."""
    subscription: str
    endpoint: str = PUBLIC_ARM
    """ARM's endpoint: the public cloud's, a sovereign cloud's (`https://management.chinacloudapi.cn`)."""
    ca_bundle: str | None = None
    """A CA file to trust for ARM instead of the system's (requests also honours REQUESTS_CA_BUNDLE)."""

    @property
    def scope(self) -> str:
        return self.endpoint.rstrip("/") + "/.default"

    def client(self, factory: Callable[..., T]) -> T:
        """An ARM SDK client whose every request passes the read-only transport."""
        from gpucluster.verify.readonly import BoundedRequestsTransport, ReadOnlyTransport

        transport = ReadOnlyTransport(BoundedRequestsTransport(connection_verify=self.ca_bundle or True), self.endpoint)
        return factory(self.credential, self.subscription, base_url=self.endpoint, credential_scopes=[self.scope],
                       transport=transport, retry_total=2)


NO_SUBSCRIPTION = "no subscription: pass --subscription <id> or set AZURE_SUBSCRIPTION_ID (`az account show --query id -o tsv`)"


def azure_access(subscription: str | None, endpoint: str | None) -> AzureAccess:
    """DefaultAzureCredential (environment, workload identity, managed identity, Azure CLI login) and the
    subscription, asked for one token up front so that missing credentials stop verify in one line."""
    from azure.core.exceptions import ClientAuthenticationError
    from azure.identity import DefaultAzureCredential

    # azure-identity logs each credential it tried as a warning; with no handler Python prints them to stderr. The
    # one line below says what to do instead.
    logging.getLogger("azure").addHandler(logging.NullHandler())
    subscription = subscription or os.environ.get("AZURE_SUBSCRIPTION_ID")
    if not subscription:
        raise SpecError.at("--subscription", NO_SUBSCRIPTION)
    chain = DefaultAzureCredential()
    failures: list[tuple[str, Exception]] = []
    chain.credentials = tuple(_Recorded(c, failures) for c in chain.credentials)
    access = AzureAccess(chain, subscription, (endpoint or PUBLIC_ARM).rstrip("/"))
    try:
        access.credential.get_token(access.scope)
    except ClientAuthenticationError:
        if failures:  # a credential that was configured and tried, and why it failed, in azure-identity's words
            name, error = failures[-1]
            reason = " ".join(str(getattr(error, "message", None) or error).split())
            raise SpecError.at("Azure credentials", f"{name} failed: {reason} (azure-identity "
                               f"DefaultAzureCredential{_ENVIRONMENT.get(name, '')})") from None
        raise SpecError.at("Azure credentials", "none found (azure-identity DefaultAzureCredential): run `az login`, "
                           "or set AZURE_CLIENT_ID and AZURE_TENANT_ID with AZURE_CLIENT_SECRET or "
                           "AZURE_FEDERATED_TOKEN_FILE for CI") from None
    return access


_ENVIRONMENT = {
    "EnvironmentCredential": "; from AZURE_CLIENT_ID, AZURE_TENANT_ID and AZURE_CLIENT_SECRET or "
                             "AZURE_CLIENT_CERTIFICATE_PATH: check them",
    "WorkloadIdentityCredential": "; from AZURE_CLIENT_ID, AZURE_TENANT_ID and AZURE_FEDERATED_TOKEN_FILE: check them",
}
"""What a credential read, where that is the environment (azure-identity's EnvironmentCredential and
WorkloadIdentityCredential docstrings)."""


class _Recorded:
    """One credential of DefaultAzureCredential's chain, keeping what it failed with when it was configured and
    tried (azure-identity's ChainedTokenCredential stops there; CredentialUnavailableError, "not configured", goes on
    to the next). The chain's own message lists every credential with its reason on several lines."""

    def __init__(self, inner: Any, failures: list[tuple[str, Exception]]) -> None:
        self._inner, self._failures = inner, failures
        # the name the chain's own log gives each attempt (azure-identity chained.py _get_error_message)
        self._credential_name = getattr(inner, "_credential_name", type(inner).__name__)

    def _call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        from azure.identity import CredentialUnavailableError

        try:
            return getattr(self._inner, method)(*args, **kwargs)
        except CredentialUnavailableError:
            raise
        except Exception as error:
            self._failures.append((self._credential_name, error))
            raise

    def get_token(self, *scopes: str, **kwargs: Any) -> Any:
        return self._call("get_token", *scopes, **kwargs)

    def get_token_info(self, *scopes: str, **kwargs: Any) -> Any:
        return self._call("get_token_info", *scopes, **kwargs)

    def __enter__(self) -> _Recorded:
        self._inner.__enter__()
        return self

    def __exit__(self, *args: Any) -> None:
        self._inner.__exit__(*args)

    def close(self) -> None:
        self._inner.close()


def kubeconfig_path(given: str | None) -> str:
    """--kubeconfig, else $KUBECONFIG (a list as kubectl takes it), else ~/.kube/config when it exists."""
    if given:
        if not Path(given).is_file():
            raise SpecError.at("--kubeconfig", f"{given}: no such file")
        return given
    if os.environ.get("KUBECONFIG"):
        return os.environ["KUBECONFIG"]
    default = Path.home() / ".kube" / "config"
    if default.is_file():
        return str(default)
    raise SpecError.at("--kubeconfig", "no kubeconfig: pass --kubeconfig <file> or set KUBECONFIG "
                                       "(`pulumi stack output adminKubeconfig --show-secrets > admin.conf`)")


_KEY_FOLDERS: list[str] = []
"""Folders the Kubernetes client wrote a kubeconfig's inline keys and certificates to, removed by remove_key_files."""


def kube_client(path: str, context: str | None) -> Any:
    """The official client's ApiClient for the kubeconfig, unguarded. urllib3 and ssl take a client key as a file
    only, so the client writes `client-key-data` out (kubernetes config/kube_config.py `_create_temp_file_with_content`,
    removed only by an atexit hook, which neither a signal's default action nor os._exit runs): here into a folder
    of our own (0700), which `remove_key_files` deletes on every way out of verify."""
    from kubernetes import client, config

    folder = tempfile.mkdtemp(prefix="gpucluster-verify-")
    _KEY_FOLDERS.append(folder)
    configuration = type.__call__(client.Configuration)  # as new_client_from_config builds it: not the default's copy
    try:
        config.load_kube_config(config_file=path, context=context, client_configuration=configuration,
                                persist_config=False, temp_file_path=folder)
    except (config.ConfigException, OSError, ValueError, TypeError, KeyError) as error:
        text = " ".join(str(error).split())[:300]
        raise SpecError.at(f"--kubeconfig {path}", f"cannot be used: {text}") from None
    return client.ApiClient(configuration=configuration)


def kube_api_client(path: str, context: str | None) -> Any:
    """The official client's ApiClient for the kubeconfig, guarded to send reads only."""
    from gpucluster.verify.readonly import guard_kubernetes

    return guard_kubernetes(kube_client(path, context))


def remove_key_files() -> None:
    """Delete every key folder written so far, and forget its files in the client's cache (keyed by content, it
    would hand a later load a path that no longer exists)."""
    from kubernetes.config import kube_config

    cache: dict[str, str] = kube_config._temp_files  # the cache of the files it wrote
    for folder in _KEY_FOLDERS:
        shutil.rmtree(folder, ignore_errors=True)
        for content, name in list(cache.items()):
            if os.path.dirname(name) == folder:
                del cache[content]
    _KEY_FOLDERS.clear()
