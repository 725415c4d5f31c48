"""The HTTP client the agents share (prefix_ipam.py, health_agent.py): JSON requests to the Kubernetes API and to
Azure, bounded in every dimension a misbehaving server could stretch. Standard library only.

- time: a per-request deadline over the whole exchange (connect, headers and every read), not only per socket call:
  a timer shuts the exchange's sockets when it passes, so a server trickling a byte at a time is cut off on time;
- size: a body larger than `max_body` bytes is refused without reading the rest;
- shape: a body that is not JSON, is cut short (fewer bytes than its Content-Length) or nests deeper than
  `max_depth` is an error, never a crash (a RecursionError from json included);
- rate: every request takes a token from a `Budget` (requests per minute), so no fault makes a loop spin;
- retries: `retrying` repeats idempotent calls on 429, 5xx and transport errors, waiting `Retry-After` (delta
  seconds or HTTP-date, RFC 9110 section 10.2.3) when the server names it, capped, else exponential backoff with
  jitter;
- lists: `list_items` pages through a Kubernetes collection with `limit` and `continue`
  (kubernetes.io/docs/reference/using-api/api-concepts/#retrieving-large-results-sets-in-chunks), yielding
  items page by page so memory holds one page, and stops on a `continue` token it has seen before;
- watches: `watch` follows a collection from a resourceVersion, one bounded event per line, an expired version
  raising ApiError(410) for the caller to list again.
- transport: https only, except to the instance metadata endpoint (plain http by design) and to loopback; a redirect
  is followed only within the origin first asked and under the same rule (the token never goes to another host);
- numbers from servers (Content-Length, Retry-After, prefix lengths, exit codes) are read as ASCII digits only
  (`whole_number`): '²' or 1e999 is "unreadable", never an exception.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import random
import re
import socket
import ssl
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from email.utils import parsedate_to_datetime
from typing import Any

MAX_BODY = 64 << 20
"""Bytes. A page of 500 Nodes is a few MiB; anything near this is not an answer to our requests."""
MAX_DEPTH = 64
"""Nesting levels: Kubernetes objects and ARM resources stay far below; a deeper body is refused."""
RETRY_AFTER_CAP = 300.0
"""Seconds: a server asking for longer is waited for this long, then asked again."""
SERVICE_ACCOUNT = os.environ.get("KUBE_SA_DIR", "/var/run/secrets/kubernetes.io/serviceaccount")
PLAIN_HTTP_HOSTS = frozenset({"169.254.169.254", "127.0.0.1", "localhost", "::1"})
RETRYABLE = frozenset({0, 408, 429, 500, 502, 503, 504})
"""0 is a transport failure: timeout, refused connection, truncated or unreadable body."""
CHUNK = 1 << 16
MAX_EVENT = 4 << 20
"""Bytes of one watch event at most (one object; a Node or CiliumNode is a few kB)."""


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


class ApiError(Exception):
    """A failed request: `status` is the HTTP status, 0 for a transport or body failure."""

    def __init__(self, status: int, message: str, retry_after: float | None = None) -> None:
        super().__init__(f"{status or 'transport'}: {message}")
        self.status = status
        self.retry_after = retry_after


_DIGITS = re.compile(r"-?[0-9]{1,18}")
"""ASCII digits only: `str.isdigit()` also accepts '²' and '٣', which `int()` and `float()` then refuse or read."""


def whole_number(value: Any, low: int | None = None, high: int | None = None) -> int | None:
    """An integer from data we did not write: a JSON integer (not a bool, not a float such as 1e999) or a string of
    ASCII digits with an optional '-', within [low, high]; None for anything else."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        number = value
    elif isinstance(value, str) and _DIGITS.fullmatch(value.strip()):
        number = int(value.strip())
    else:
        return None
    if (low is not None and number < low) or (high is not None and number > high):
        return None
    return number


def retry_after_seconds(value: str | None, now: float, cap: float = RETRY_AFTER_CAP) -> float | None:
    """`Retry-After` as seconds to wait from `now` (epoch seconds), at most `cap`; None when absent or unreadable.
    RFC 9110 section 10.2.3: either delay-seconds (ASCII digits) or an HTTP-date."""
    if not value:
        return None
    text = value.strip()
    if re.fullmatch(r"[0-9]+", text):
        return min(float(text[:18]) if len(text) <= 18 else cap, cap)
    try:
        when = parsedate_to_datetime(text)
        return max(0.0, min(when.timestamp() - now, cap))
    except (TypeError, ValueError, IndexError, OverflowError):
        return None


_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")


def too_deep(data: bytes, limit: int) -> bool:
    """Whether a JSON text nests more than `limit` containers deep, decided before parsing it (so a hostile body
    never reaches json's recursion): strings dropped, brackets kept, innermost pairs removed once per level; all of
    it in C, a pass per level, not a Python step per character."""
    brackets = _STRING.sub(b"", data).translate(None, _NOT_BRACKETS)
    for _ in range(limit):
        inner = brackets.replace(b"[]", b"").replace(b"{}", b"")
        if not inner or inner == brackets:
            return False  # balanced within the limit, or malformed (json reports that)
        brackets = inner
    return True


def decode(data: bytes, max_depth: int = MAX_DEPTH) -> Any:
    """JSON from a body, or ApiError(0): not JSON, cut short, or nested deeper than `max_depth`."""
    if too_deep(data, max_depth):
        raise ApiError(0, f"body nests deeper than {max_depth} levels")
    try:
        return json.loads(data) if data.strip() else None
    except (ValueError, RecursionError) as error:
        raise ApiError(0, f"body is not JSON ({type(error).__name__}, {len(data)} bytes)") from None


def backoff_seconds(failures: int, base: float, cap: float, rng: random.Random | None = None) -> float:
    """Exponential backoff with jitter: half the step fixed, half random, so replicas and scale sets that failed
    together do not retry together."""
    step = min(cap, base * (2 ** max(0, failures - 1)))
    return step / 2 + (rng or random).uniform(0, step / 2)


class Budget:
    """At most `per_minute` requests in any minute: a token bucket of that size, refilled continuously. `take`
    waits for a token, so a fault that would make a loop spin makes it wait instead."""

    def __init__(self, per_minute: float, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        if per_minute <= 0:
            raise ValueError("a request budget must be positive")
        self.rate = per_minute / 60.0
        self.size = float(per_minute)
        self.tokens = self.size
        self.clock, self.sleep = clock, sleep
        self.stamp = clock()
        self.taken = 0
        self.lock = threading.Lock()

    def take(self) -> None:
        """Thread-safe: the lease's renewals and a round's requests may share one budget."""
        while True:
            with self.lock:
                now = self.clock()
                self.tokens = min(self.size, self.tokens + (now - self.stamp) * self.rate)
                self.stamp = now
                if self.tokens >= 1:
                    self.tokens -= 1
                    self.taken += 1
                    return
                wait = (1 - self.tokens) / self.rate
            self.sleep(wait)


def _check_transport(url: str) -> None:
    parts = urllib.parse.urlsplit(url)
    if parts.scheme == "https" or (parts.scheme == "http" and parts.hostname in PLAIN_HTTP_HOSTS):
        return
    raise ApiError(0, f"refusing {parts.scheme or 'schemeless'} URL to {parts.hostname}: https only")


def origin(url: str) -> tuple[str, str]:
    parts = urllib.parse.urlsplit(url)
    return parts.scheme.lower(), parts.netloc.lower()


class Deadline:
    """A wall-clock bound over one exchange: when it passes, every socket the exchange opened is shut down, so a
    read blocked on a server that sends a byte at a time returns at once (a socket timeout bounds each recv, not
    the sum of them)."""

    def __init__(self, seconds: float) -> None:
        self.at = time.monotonic() + seconds
        self.expired = False
        self.sockets: list[Any] = []
        self.lock = threading.Lock()
        self.timer = threading.Timer(max(0.0, seconds), self._expire)
        self.timer.daemon = True
        self.timer.start()

    def watch(self, sock: Any) -> None:
        with self.lock:
            self.sockets.append(sock)
            expired = self.expired
        if expired:
            _shut(sock)

    def _expire(self) -> None:
        with self.lock:
            self.expired = True
            sockets = list(self.sockets)
        for sock in sockets:
            _shut(sock)

    def remaining(self) -> float:
        return self.at - time.monotonic()

    def cancel(self) -> None:
        self.timer.cancel()


def _shut(sock: Any) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)


def _watched(base: type[http.client.HTTPConnection], deadline: Deadline) -> Callable[..., http.client.HTTPConnection]:
    class Watched(base):  # type: ignore[misc, valid-type]
        def connect(self) -> None:
            super().connect()
            deadline.watch(self.sock)

    return Watched


class _SameOrigin(urllib.request.HTTPRedirectHandler):
    """Redirects are followed only to the origin first asked and only over a transport `_check_transport` allows:
    the bearer token never travels to another host or over plain http."""

    def redirect_request(self, req: urllib.request.Request, fp: Any, code: int, msg: str, headers: Any,
                         newurl: str) -> urllib.request.Request | None:
        _check_transport(newurl)
        if origin(newurl) != origin(req.full_url):
            raise ApiError(0, f"{req.get_method()} {_short(req.full_url)}: redirected to another origin "
                              f"{_short(newurl)}, not followed")
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def _opener(context: ssl.SSLContext | None, deadline: Deadline) -> urllib.request.OpenerDirector:
    """urllib's handlers with connections that the deadline can cut and a redirect rule that keeps the origin."""

    class Plain(urllib.request.HTTPHandler):
        def http_open(self, req: urllib.request.Request) -> Any:
            return self.do_open(_watched(http.client.HTTPConnection, deadline), req)

    class Tls(urllib.request.HTTPSHandler):
        def https_open(self, req: urllib.request.Request) -> Any:
            return self.do_open(_watched(http.client.HTTPSConnection, deadline), req, context=context)

    return urllib.request.build_opener(Plain(), Tls(context=context), _SameOrigin())


class Http:
    """One endpoint's JSON client. `headers` is called per request (a rotated token is read each time)."""

    def __init__(self, headers: Callable[[], dict[str, str]] = dict, *, ca_file: str | None = None,
                 timeout: float = 15.0, max_body: int = MAX_BODY, max_depth: int = MAX_DEPTH,
                 budget: Budget | None = None, wall: Callable[[], float] = time.time,
                 sleep: Callable[[float], None] = time.sleep, retry_base: float = 1.0,
                 retry_cap: float = 30.0) -> None:
        self.headers = headers
        self.context = ssl.create_default_context(cafile=ca_file) if ca_file and os.path.exists(ca_file) else None
        self.timeout, self.max_body, self.max_depth = timeout, max_body, max_depth
        self.budget = budget or Budget(600)
        self.wall, self.sleep = wall, sleep
        self.retry_base, self.retry_cap = retry_base, retry_cap

    def send(self, request: urllib.request.Request) -> Any:
        """One attempt. Raises ApiError for any failure, with the server's Retry-After when it named one."""
        _check_transport(request.full_url)
        for key, value in self.headers().items():
            if not request.has_header(key.capitalize()):
                request.add_header(key, value)
        self.budget.take()
        deadline = Deadline(self.timeout)
        where = f"{request.get_method()} {_short(request.full_url)}"
        try:
            with _opener(self.context, deadline).open(request, timeout=self.timeout) as response:
                data = self._read(response, deadline, self.max_body)
        except urllib.error.HTTPError as error:
            retry_after = retry_after_seconds(error.headers.get("Retry-After"), self.wall())
            try:
                detail = error.read(2048).decode(errors="replace").strip()
            except (OSError, http.client.HTTPException):
                detail = ""
            raise ApiError(error.code, f"{where}: {detail[:300]}", retry_after) from None
        except (urllib.error.URLError, OSError, http.client.HTTPException, ValueError) as error:
            if deadline.expired:
                raise ApiError(0, f"{where}: no complete answer within the request's {self.timeout:g} s") from None
            raise ApiError(0, f"{where}: {type(error).__name__} {error}") from None
        finally:
            deadline.cancel()
        if deadline.expired:  # the socket was shut mid-body: what was read is not the answer
            raise ApiError(0, f"{where}: no complete answer within the request's {self.timeout:g} s")
        return decode(data, self.max_depth)

    @staticmethod
    def _read(response: Any, deadline: Deadline, limit: int) -> bytes:
        """The whole body within the deadline and the size limit; a body cut short raises IncompleteRead."""
        declared = whole_number(response.headers.get("Content-Length"), 0)
        if declared is not None and declared > limit:
            raise ApiError(0, f"body of {declared} bytes is over the {limit}-byte limit")
        chunks: list[bytes] = []
        size = 0
        while True:
            if deadline.expired or deadline.remaining() <= 0:
                raise ApiError(0, "body not received within the request's deadline")
            chunk = response.read(CHUNK)
            if not chunk:
                return b"".join(chunks)
            size += len(chunk)
            if size > limit:
                raise ApiError(0, f"body over the {limit}-byte limit")
            chunks.append(chunk)

    def call(self, method: str, url: str, body: Any = None, content_type: str = "application/json") -> Any:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(url, data=data, method=method)
        request.add_header("Accept", "application/json")
        if data is not None:
            request.add_header("Content-Type", content_type)
        return self.send(request)

    def retrying(self, attempt: Callable[[], Any], tries: int = 3) -> Any:
        """`attempt()` again on a retryable failure, `tries` times in all; waits Retry-After (at most `retry_cap`)
        or backoff with jitter between tries. Only for idempotent calls."""
        base, cap = self.retry_base, self.retry_cap
        for n in range(1, tries + 1):
            try:
                return attempt()
            except ApiError as error:
                if error.status not in RETRYABLE or n == tries:
                    raise
                wait = error.retry_after if error.retry_after is not None else backoff_seconds(n, base, cap)
                self.sleep(min(wait, cap))
        raise AssertionError("unreachable")


def _short(url: str) -> str:
    return url.split("?", 1)[0][:200]


def segment(value: str) -> str:
    """One path segment from data we did not write (a node name, a providerID part): percent-escaped with no safe
    characters, so '/', '?', '#' and '..' cannot change the request's path."""
    if not value or value in (".", ".."):
        raise ValueError(f"{value!r} is not a path segment")
    return urllib.parse.quote(value, safe="")


class Kube(Http):
    """The Kubernetes API through the pod's service account (token re-read per request: kubelet rotates it)."""

    def __init__(self, api: str | None = None, account: str | None = None, **kwargs: Any) -> None:
        account = account or SERVICE_ACCOUNT
        self.api = (api or os.environ.get("KUBE_API") or "https://kubernetes.default.svc").rstrip("/")
        self.token_file = f"{account}/token"
        super().__init__(self._auth, ca_file=f"{account}/ca.crt", **kwargs)

    def _auth(self) -> dict[str, str]:
        with open(self.token_file) as f:
            return {"Authorization": f"Bearer {f.read().strip()}"}

    def get(self, path: str, tries: int = 3) -> Any:
        return self.retrying(lambda: self.call("GET", self.api + path), tries)

    def write(self, method: str, path: str, body: Any, content_type: str = "application/json") -> Any:
        """One attempt: a write is retried by the caller's next round, after a fresh read."""
        return self.call(method, self.api + path, body, content_type)

    def list_pages(self, path: str, query: dict[str, str] | None = None, limit: int = 500,
                   max_pages: int = 1000) -> Iterator[dict[str, Any]]:
        """A collection page by page (`limit` and `continue`); each page is a list with `items`. Every page of a
        paginated list comes from the snapshot of its first, whose `metadata.resourceVersion` a watch starts from
        (kubernetes API concepts, "Retrieving large results sets in chunks")."""
        params = {**(query or {}), "limit": str(limit)}
        seen: set[str] = set()
        for _ in range(max_pages):
            page = self.get(f"{path}?{urllib.parse.urlencode(params)}")
            if not isinstance(page, dict) or not isinstance(page.get("items"), list):
                raise ApiError(0, f"GET {path}: not a list")
            yield page
            token = (page.get("metadata") or {}).get("continue") if isinstance(page.get("metadata"), dict) else None
            if not token:
                return
            if token in seen:
                raise ApiError(0, f"GET {path}: continue token repeats")
            seen.add(token)
            params["continue"] = str(token)
        raise ApiError(0, f"GET {path}: more than {max_pages} pages")

    def list_items(self, path: str, query: dict[str, str] | None = None, limit: int = 500,
                   max_pages: int = 1000) -> Iterator[dict[str, Any]]:
        """Every item of a collection, one page of `limit` in memory at a time."""
        for page in self.list_pages(path, query, limit, max_pages):
            yield from (item for item in page["items"] if isinstance(item, dict))

    def watch(self, path: str, resource_version: str, seconds: int, max_event: int = MAX_EVENT
              ) -> Iterator[dict[str, Any]]:
        """The changes to a collection after `resource_version`, one event per line, until the API server ends the
        watch after `seconds` (`timeoutSeconds`). Bookmarks are asked for, so a quiet collection still moves the
        version on. An expired version is an ERROR event (or an HTTP 410) with code 410 Gone: ApiError(410), after
        which the caller lists again (kubernetes API concepts, "Efficient detection of changes"; client-go
        tools/cache reflector.go). A cut, oversized or malformed event raises ApiError(0)."""
        query = urllib.parse.urlencode({"watch": "1", "resourceVersion": resource_version,
                                        "allowWatchBookmarks": "true", "timeoutSeconds": str(seconds)})
        request = urllib.request.Request(f"{self.api}{path}?{query}", headers={"Accept": "application/json"})
        _check_transport(request.full_url)
        for key, value in self.headers().items():
            request.add_header(key, value)
        self.budget.take()
        deadline = Deadline(seconds + self.timeout)
        try:
            with _opener(self.context, deadline).open(request, timeout=self.timeout) as response:
                while True:
                    if deadline.expired or deadline.remaining() <= 0:
                        raise ApiError(0, f"watch {path}: still open past its timeoutSeconds")
                    line = response.readline(max_event + 1)
                    if not line:
                        return
                    if len(line) > max_event:
                        raise ApiError(0, f"watch {path}: an event over the {max_event}-byte limit")
                    if not line.strip():
                        continue
                    if not line.endswith(b"\n"):
                        raise ApiError(0, f"watch {path}: an event cut short")
                    event = decode(line, self.max_depth)
                    if not isinstance(event, dict) or not isinstance(event.get("object"), dict):
                        raise ApiError(0, f"watch {path}: not a watch event")
                    if event.get("type") == "ERROR":
                        code = event["object"].get("code")
                        raise ApiError(code if isinstance(code, int) else 0,
                                       f"watch {path}: {str(event['object'].get('message'))[:200]}")
                    yield event
        except urllib.error.HTTPError as error:
            raise ApiError(error.code, f"watch {path}: HTTP {error.code}",
                           retry_after_seconds(error.headers.get("Retry-After"), self.wall())) from None
        except (urllib.error.URLError, OSError, http.client.HTTPException, ValueError) as error:
            if deadline.expired:
                raise ApiError(0, f"watch {path}: still open past its timeoutSeconds") from None
            raise ApiError(0, f"watch {path}: {type(error).__name__} {error}") from None
        finally:
            deadline.cancel()


def managed_identity_token(http: Http, endpoint: str, resource: str, client_id: str) -> tuple[str, object]:
    """A token for `resource` from the VM's identity endpoint (IMDS, api-version 2018-02-01) as the identity
    `client_id`, and the answer's `expires_in` as sent (callers decide how long they keep the token)."""
    query = urllib.parse.urlencode({"api-version": "2018-02-01", "resource": resource, "client_id": client_id})
    request = urllib.request.Request(f"{endpoint}?{query}", headers={"Metadata": "true"})
    answer = http.retrying(lambda: http.send(request))
    token = answer.get("access_token") if isinstance(answer, dict) else None
    if not isinstance(token, str) or not token:
        raise ApiError(0, "the identity endpoint returned no access_token")
    return token, answer.get("expires_in")


def token_reused_until(expires_in: object, now: float) -> float:
    """When a managed-identity token is fetched again: five minutes before the `expires_in` IMDS gave (seconds, an
    ASCII number; 300 when it gave none), so a long step never sends an expired one."""
    life = whole_number(expires_in, 0, 86_400 * 365) or 300
    return now + max(0, life - 300)


class IdentityToken:
    """One managed identity's token for one resource, fetched from `endpoint` and reused until
    `token_reused_until` says (the ARM clients of prefix_ipam.py and rollout_arm.py). `endpoint` is called on each
    fetch, so a test's replacement of the module's IMDS address is read then."""

    def __init__(self, http: Http, endpoint: Callable[[], str], resource: str, client_id: str,
                 clock: Callable[[], float] = time.time) -> None:
        self.http, self.endpoint, self.resource, self.client_id, self.clock = http, endpoint, resource, client_id, clock
        self.token, self.until = "", float("-inf")

    def get(self) -> str:
        if self.token and self.clock() < self.until:
            return self.token
        token, expires_in = managed_identity_token(self.http, self.endpoint(), self.resource, self.client_id)
        self.token, self.until = token, token_reused_until(expires_in, self.clock())
        return token
