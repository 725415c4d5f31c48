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

import time
from typing import Any, cast

import requests
from azure.core.pipeline.transport import HttpTransport, RequestsTransport
from urllib3.util.retry import Retry

from gpucluster.verify import bounds

READ_METHODS = frozenset({"GET", "HEAD"})


class WriteRefusedError(Exception):
    """A client tried to send a write; it was refused before it left the process."""


def refuse_writes(method: str, url: str) -> None:
    if method.upper() not in READ_METHODS:
        raise WriteRefusedError(f"{method.upper()} {url}")


class ReadOnlyTransport(HttpTransport):  # type: ignore[type-arg]
    """An azure-core transport that sends only reads, through the transport it wraps, and only to `origin` over https
    within verify's bounds (components/verify/bounds.py): every request the pipeline sends, a nextLink or a retry
    included, passes here. azure-core's RetryPolicy waits a Retry-After through `sleep`, capped here."""

    def __init__(self, inner: HttpTransport, origin: str) -> None:  # type: ignore[type-arg]
        self._inner = inner
        self._origin = origin

    def send(self, request: Any, **kwargs: Any) -> Any:
        refuse_writes(str(request.method), str(request.url))
        bounds.before_request(str(request.url), self._origin)
        return self._inner.send(request, **kwargs)

    def sleep(self, duration: float) -> None:
        time.sleep(min(float(duration), bounds.limits().retry_wait_cap))

    def open(self) -> None:
        self._inner.open()

    def close(self) -> None:
        self._inner.close()

    def __enter__(self) -> ReadOnlyTransport:
        self._inner.__enter__()
        return self

    def __exit__(self, *args: Any) -> None:
        self._inner.__exit__(*args)


def _read_within(response: requests.Response, *args: Any, **kwargs: Any) -> requests.Response:
    """A response hook: it runs before requests reads the body, so a 400 MB answer is refused at the bound instead
    of held whole."""
    if not response._content_consumed:  # filled here as requests fills it from the stream
        response._content = bounds.read_bounded(
            response.raw.stream(1 << 16, decode_content=True), response.headers.get("Content-Length"))
        response._content_consumed = True
    return response


class BoundedRequestsTransport(RequestsTransport):
    """azure-core's requests transport, its session's answers read within verify's body bound."""

    def _init_session(self, session: requests.Session) -> None:
        super()._init_session(session)
        session.hooks["response"].append(_read_within)


class _CappedRetry(Retry):
    """urllib3's retries with a server-named wait capped (urllib3 sleeps a Retry-After whole, 600 s included)."""

    def get_retry_after(self, response: Any) -> float | None:
        wait = super().get_retry_after(response)
        return None if wait is None else min(wait, bounds.limits().retry_wait_cap)


class _ReadOnlyPool:
    """A urllib3 pool manager that refuses writes and passes reads to the one it wraps: to the kubeconfig's server
    only, over https, never following a redirect, its body read within the bound."""

    def __init__(self, inner: Any, origin: str) -> None:
        self._inner = inner
        self._origin = origin

    def _bounded(self, send: Any, method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        refuse_writes(method, url)
        bounds.before_request(url, self._origin)
        kwargs.update(redirect=False, retries=_CappedRetry(total=2, redirect=False), preload_content=False)
        response = send(method, url, *args, **kwargs)
        response._body = bounds.read_bounded(response.stream(1 << 16), response.headers.get("Content-Length"))
        return response

    def request(self, method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        return self._bounded(self._inner.request, method, url, *args, **kwargs)

    def urlopen(self, method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        return self._bounded(self._inner.urlopen, method, url, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def guard_kubernetes(api_client: Any) -> Any:
    """The same ApiClient, its REST client's pool manager wrapped so that only reads are sent, to its own server."""
    rest = cast(Any, api_client.rest_client)
    if not isinstance(rest.pool_manager, _ReadOnlyPool):
        rest.pool_manager = _ReadOnlyPool(rest.pool_manager, str(api_client.configuration.host))
    return api_client
