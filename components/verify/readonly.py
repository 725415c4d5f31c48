"""Read-only by construction: every client `verify` builds refuses a request other than GET or HEAD before it is sent.

- Azure: the guard is the pipeline's transport, the last hop of azure-core's pipeline, not a policy in it. The ARM
  SDKs' own pipeline holds `ARMAutoResourceProviderRegistrationPolicy` (azure-mgmt-core
  `policies/_base.py`), which answers a 409 `MissingSubscriptionRegistration` by sending
  `POST /subscriptions/S/providers/NS/register` through the policies after it only: a policy placed before it would
  never see that write, the transport sees every request that leaves the process.
- Kubernetes: the guard wraps the client's urllib3 pool manager, through which the official client sends every
  REST request (kubernetes `client/rest.py`, `RESTClientObject.request` -> `pool_manager.request`).
"""

from __future__ import annotations

from typing import Any, cast

from azure.core.pipeline.transport import HttpTransport

READ_METHODS = frozenset({"GET", "HEAD"})


class WriteRefusedError(Exception):
    """A client tried to send a write; it was refused before it left the process."""


def refuse_writes(method: str, url: str) -> None:
    if method.upper() not in READ_METHODS:
        raise WriteRefusedError(f"{method.upper()} {url}")


class ReadOnlyTransport(HttpTransport):  # type: ignore[type-arg]
    """An azure-core transport that sends only reads, through the transport it wraps."""

    def __init__(self, inner: HttpTransport) -> None:  # type: ignore[type-arg]
        self._inner = inner

    def send(self, request: Any, **kwargs: Any) -> Any:
        refuse_writes(str(request.method), str(request.url))
        return self._inner.send(request, **kwargs)

    def open(self) -> None:
        self._inner.open()

    def close(self) -> None:
        self._inner.close()

    def __enter__(self) -> ReadOnlyTransport:
        self._inner.__enter__()
        return self

    def __exit__(self, *args: Any) -> None:
        self._inner.__exit__(*args)


class _ReadOnlyPool:
    """A urllib3 pool manager that refuses writes and passes reads to the one it wraps."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def request(self, method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        refuse_writes(method, url)
        return self._inner.request(method, url, *args, **kwargs)

    def urlopen(self, method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        refuse_writes(method, url)
        return self._inner.urlopen(method, url, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def guard_kubernetes(api_client: Any) -> Any:
    """The same ApiClient, its REST client's pool manager wrapped so that only reads are sent."""
    rest = cast(Any, api_client.rest_client)
    if not isinstance(rest.pool_manager, _ReadOnlyPool):
        rest.pool_manager = _ReadOnlyPool(rest.pool_manager)
    return api_client
