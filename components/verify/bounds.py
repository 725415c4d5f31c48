"""What `verify` spends at most, whatever ARM or the API server answers: pages per list, bytes per answer, seconds
of a server-named wait, seconds per check and for the whole run, and which hosts it talks to. A check stopped by a
bound fails with a verdict that names the bound.

- pages: a list stops after MAX_PAGES pages, or at a `nextLink` / `continue` it has already followed (a link to itself
  loops for ever; a repeating continue token grows the list without end); SDK pagers follow `nextLink` through the
  transport, which also counts a check's requests (MAX_REQUESTS);
- bytes: an answer over MAX_BODY is refused (its Content-Length first, else while it is read), never held whole;
- waits: a `Retry-After` is honoured up to RETRY_WAIT_CAP seconds (azure-core's RetryPolicy sleeps through the
  transport's `sleep`; urllib3's Retry through `get_retry_after`);
- time: each check runs in a thread of its own and is given up after CHECK_SECONDS (or what is left of
  TOTAL_SECONDS), so a server trickling an answer, or headers, a byte at a time cannot hold verify open;
- hosts: every request, redirects and `nextLink`s included, goes over https to the origin verify was given (ARM's
  endpoint, the kubeconfig's server); a redirect is never followed, so a token never travels elsewhere.
"""

from __future__ import annotations

import threading
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

MAX_PAGES = 1000
"""Pages of one list: 500 000 Kubernetes objects at limit=500, far more ARM pages than any list of ours holds."""
MAX_REQUESTS = 5000
"""Requests of one check (ARM and the API server): SDK pagers follow nextLinks on their own."""
MAX_BODY = 64 << 20
"""Bytes of one answer: a page of 500 Nodes is a few MiB."""
RETRY_WAIT_CAP = 30.0
"""Seconds of a server-named Retry-After honoured at most."""
CHECK_SECONDS = 300.0
TOTAL_SECONDS = 1800.0
T = TypeVar("T")


class BoundError(Exception):
    """A bound stopped a check: `bound` names it as the verdict prints it."""

    def __init__(self, bound: str, detail: str) -> None:
        super().__init__(f"stopped by the bound on {bound}: {detail}")
        self.bound = bound


@dataclass(frozen=True)
class Limits:
    check_seconds: float = CHECK_SECONDS
    total_seconds: float = TOTAL_SECONDS
    max_pages: int = MAX_PAGES
    max_requests: int = MAX_REQUESTS
    max_body: int = MAX_BODY
    retry_wait_cap: float = RETRY_WAIT_CAP


LIMITS = Limits()
_check = threading.local()
"""The running check's state, per thread: `cancelled` (an Event set when its time ran out) and `requests`."""


def limits() -> Limits:
    return getattr(_check, "limits", LIMITS)


def before_request(url: str, origin: str) -> None:
    """Called for every request: stop a check whose time ran out or that asked too often, and refuse a request that
    leaves `origin` or https."""
    cancelled = getattr(_check, "cancelled", None)
    if cancelled is not None and cancelled.is_set():
        raise BoundError("time per check", "the check's time ran out; no further request is sent")
    _check.requests = getattr(_check, "requests", 0) + 1
    if _check.requests > limits().max_requests:
        raise BoundError("requests per check", f"more than {limits().max_requests} requests")
    same_origin(url, origin)


def same_origin(url: str, origin: str) -> None:
    parts, home = urllib.parse.urlsplit(url), urllib.parse.urlsplit(origin)
    if parts.scheme.lower() != "https":
        raise BoundError("hosts", f"refusing {parts.scheme or 'schemeless'} URL {url[:120]}: https only")
    if (parts.hostname, parts.port) != (home.hostname, home.port):
        raise BoundError("hosts", f"refusing {url[:120]}: not {home.scheme}://{home.netloc} (a token stays with "
                                  "the service it was given for)")


def read_bounded(chunks: Iterator[bytes], declared: str | None) -> bytes:
    """An answer's body from its chunks, refused over MAX_BODY (by its Content-Length first)."""
    cap = limits().max_body
    if declared and declared.strip().isascii() and declared.strip().isdigit() and int(declared) > cap:
        raise BoundError("body size", f"an answer of {declared} bytes, over {cap}")
    data, size = [], 0
    for chunk in chunks:
        size += len(chunk)
        if size > cap:
            raise BoundError("body size", f"an answer over {cap} bytes")
        data.append(chunk)
    return b"".join(data)


def pages(fetch: Callable[[str | None], tuple[T, str | None]], what: str) -> Iterator[T]:
    """Pages from `fetch(token) -> (page, next token)`, stopped by MAX_PAGES and by a token seen before."""
    seen: set[str] = set()
    token: str | None = None
    for _ in range(limits().max_pages):
        page, token = fetch(token)
        yield page
        if not token:
            return
        if token in seen:
            raise BoundError("pages", f"{what}: the next page is one already read ({token[:80]})")
        seen.add(token)
    raise BoundError("pages", f"{what}: more than {limits().max_pages} pages")


@dataclass
class Outcome:
    value: Any = None
    error: BaseException | None = None
    done: bool = False


def within(seconds: float, run: Callable[[], T], bound: str, chosen: Limits = LIMITS) -> T:
    """`run()` in a daemon thread, given up after `seconds`: BoundError(bound). The thread is told to stop (its next
    request raises) and left to end on its own; verify does not wait for it."""
    outcome = Outcome()
    cancelled = threading.Event()

    def body() -> None:
        _check.cancelled, _check.requests, _check.limits = cancelled, 0, chosen
        try:
            outcome.value = run()
        except BaseException as error:  # handed to the caller's thread as is
            outcome.error = error
        outcome.done = True

    thread = threading.Thread(target=body, daemon=True, name="verify-check")
    thread.start()
    thread.join(max(0.0, seconds))
    if not outcome.done:
        cancelled.set()
        raise BoundError(bound, f"no verdict within {seconds:g} s")
    if outcome.error is not None:
        raise outcome.error
    return outcome.value
