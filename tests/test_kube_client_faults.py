"""The agents' shared client (agents/kube_client.py) against a fake API server on 127.0.0.1
(tests/support/fake_kube.py) that misbehaves in ways a socket timeout alone does not catch: an answer trickled a byte at a
time (each recv returns well within the timeout, the exchange never ends), redirects to another origin or to plain
http (urllib follows a 302 with every header it was given), and numbers that `str.isdigit()` accepts but `int()`
and `float()` refuse (Retry-After `²`; RFC 9110 section 10.2.3 defines delay-seconds as `1*DIGIT`, and RFC 5234
appendix B.1 defines DIGIT as %x30-39 only)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gpucluster.agents import kube_client as kc
from tests.support.fake_kube import FakeKube, Fault

NODE = "/api/v1/nodes/gpu-0"


@pytest.fixture
def kube() -> Iterator[FakeKube]:
    fake = FakeKube()
    with fake.running():
        fake.put_object("/api/v1/nodes", {"metadata": {"name": "gpu-0"}})
        yield fake


def client(fake: FakeKube, tmp_path: Path, timeout: float = 10.0, **kwargs: object) -> kc.Kube:
    (tmp_path / "token").write_text("secret-token")
    return kc.Kube(fake.url, str(tmp_path), timeout=timeout, budget=kc.Budget(100_000), retry_base=0.01,
                   retry_cap=0.05, **kwargs)  # type: ignore[arg-type]


def test_an_answer_trickled_a_byte_at_a_time_ends_at_the_deadline(kube: FakeKube, tmp_path: Path) -> None:
    """About 2,100 bytes at one per 50 ms: every recv returns well within the 2 s socket timeout, the whole would
    take ~105 s; the 2 s deadline ends it (the bound leaves a loaded machine 10 s to notice)."""
    kube.inject("GET", NODE, Fault(200, body=b'{"metadata": {"name": "' + b"x" * 2000 + b'"}}', trickle=0.05))
    started = time.monotonic()
    with pytest.raises(kc.ApiError, match="within the request's"):
        client(kube, tmp_path, timeout=2.0).call("GET", kube.url + NODE)
    assert time.monotonic() - started < 12


def test_a_watch_trickled_a_byte_at_a_time_ends_at_its_deadline(kube: FakeKube, tmp_path: Path) -> None:
    """About 2,200 bytes at one per 50 ms (~110 s): the watch's deadline, its 1 s timeoutSeconds and the 2 s request
    timeout, ends it."""
    line = b'{"type": "ADDED", "object": {"metadata": {"name": "gpu-1", "resourceVersion": "9"}}}\n' * 25
    kube.inject("GET", "/api/v1/nodes", Fault(200, body=line, trickle=0.05))
    started = time.monotonic()
    with pytest.raises(kc.ApiError, match="past its timeoutSeconds"):
        list(client(kube, tmp_path, timeout=2.0).watch("/api/v1/nodes", "1", 1))
    assert time.monotonic() - started < 13


def test_a_redirect_to_another_origin_is_not_followed_and_gets_no_token(kube: FakeKube, tmp_path: Path) -> None:
    other = FakeKube()
    with other.running():
        kube.inject("GET", NODE, Fault(302, {"Location": f"{other.url}/steal"}))
        with pytest.raises(kc.ApiError, match="another origin"):
            client(kube, tmp_path).call("GET", kube.url + NODE)
        assert other.seen == []


def test_a_redirect_to_plain_http_elsewhere_is_refused(kube: FakeKube, tmp_path: Path) -> None:
    kube.inject("GET", NODE, Fault(307, {"Location": "http://attacker.example/steal"}))
    with pytest.raises(kc.ApiError, match="https only"):
        client(kube, tmp_path).call("GET", kube.url + NODE)


def test_a_redirect_within_the_origin_is_followed(kube: FakeKube, tmp_path: Path) -> None:
    kube.inject("GET", "/api/v1/nodes/old", Fault(302, {"Location": f"{kube.url}{NODE}"}))
    assert client(kube, tmp_path).call("GET", kube.url + "/api/v1/nodes/old")["metadata"]["name"] == "gpu-0"


@pytest.mark.parametrize("header", ["²", "٣", "1e3", "-5", "9" * 400])
def test_a_retry_after_that_is_not_ascii_digits_is_no_crash(kube: FakeKube, tmp_path: Path, header: str) -> None:
    waits: list[float] = []
    kube.inject("GET", NODE, Fault(429, {"Retry-After": header}))
    got = client(kube, tmp_path, sleep=waits.append).get(NODE)
    assert got["metadata"]["name"] == "gpu-0" and len(waits) == 1
    assert waits[0] <= 0.05  # our own capped backoff (or the capped delay): never 10**399 seconds


def test_numbers_from_servers_are_ascii_digits_only() -> None:
    assert kc.whole_number("28") == 28 and kc.whole_number(28) == 28 and kc.whole_number("-1") == -1
    for bad in ["²", "٣", "--1", "1e999", "", " ", True, 1e999, 28.0, None, "0x1c", "+1"]:
        assert kc.whole_number(bad) is None, bad
    assert kc.whole_number("33", 0, 32) is None
    assert kc.retry_after_seconds("²", time.time()) is None
    assert kc.retry_after_seconds("9" * 400, time.time()) == kc.RETRY_AFTER_CAP


# Each promise of the client's docstring, against a server that breaks it.

@pytest.mark.parametrize("declared", [True, False], ids=["content-length", "chunks"])
def test_a_body_over_the_size_bound_is_refused(kube: FakeKube, tmp_path: Path, declared: bool) -> None:
    body = b'{"items": "' + b"x" * (300 << 10) + b'"}'
    kube.inject("GET", NODE, Fault(200, body=body, truncate=False))
    client_ = client(kube, tmp_path, max_body=256 << 10)
    if not declared:  # the same size arriving without a usable Content-Length
        kube.faults.clear()
        kube.inject("GET", NODE, Fault(200, {"Content-Length": "²"}, body=body))
    with pytest.raises(kc.ApiError, match="limit"):
        client_.call("GET", kube.url + NODE)


def test_a_repeating_continue_token_ends_the_list(kube: FakeKube, tmp_path: Path) -> None:
    kube.inject("GET", "/api/v1/nodes", Fault(200, body=b'{"items": [], "metadata": {"continue": "same"}}', times=5))
    with pytest.raises(kc.ApiError, match="continue token repeats"):
        list(client(kube, tmp_path).list_items("/api/v1/nodes"))
    assert len(kube.requests("GET", "^/api/v1/nodes$")) == 2


@pytest.mark.parametrize(("body", "error"), [
    (b'{"type": "ADDED", "object": {"metadata": {"name": "' + b"x" * 2048 + b'"}}}\n', "over the"),
    (b'{"type": "ADDED", "object": {"metadata": {"name": "cut"', "cut short"),
    (b'{"type": "ERROR", "object": {"kind": "Status", "code": 410, "message": "too old"}}\n', "410"),
], ids=["oversized event", "cut event", "expired"])
def test_a_watch_that_breaks_its_promises_is_an_error(kube: FakeKube, tmp_path: Path, body: bytes, error: str) -> None:
    kube.inject("GET", "/api/v1/nodes", Fault(200, body=body))
    with pytest.raises(kc.ApiError, match=error):
        list(client(kube, tmp_path).watch("/api/v1/nodes", "1", 1, max_event=1024))


def test_plain_http_goes_only_to_the_metadata_endpoint_and_loopback(tmp_path: Path) -> None:
    http = kc.Http(budget=kc.Budget(100_000))
    with pytest.raises(kc.ApiError, match="https only"):
        http.call("GET", "http://management.azure.com/subscriptions")
    kc._check_transport("http://169.254.169.254/metadata/identity/oauth2/token")  # IMDS: plain http by design


def test_a_managed_identity_token_is_reused_until_five_minutes_before_it_expires() -> None:
    """Both ARM clients (prefix IPAM, the rollout controller) read IMDS's `expires_in` the same way: a number of
    seconds as ASCII digits; anything else (missing, negative, non-ASCII digits) counts as 300, fetched again at once."""
    assert kc.token_reused_until("3599", 1000.0) == 1000.0 + 3299
    assert kc.token_reused_until(None, 1000.0) == kc.token_reused_until("-5", 1000.0) == 1000.0
    assert kc.token_reused_until("\uff13\uff16\uff10\uff10", 1000.0) == 1000.0


def test_an_identity_token_is_reused_until_five_minutes_before_it_expires() -> None:
    """kube_client.IdentityToken, the one token cache of the prefix IPAM and rollout controllers' ARM clients."""
    answers = iter([{"access_token": "a", "expires_in": "3600"}, {"access_token": "b", "expires_in": "3600"}])
    fetched: list[str] = []

    class Http:
        def retrying(self, attempt: Any) -> Any:
            return attempt()

        def send(self, request: Any) -> Any:
            fetched.append(request.full_url)
            return next(answers)

    clock = [1000.0]
    tokens = kc.IdentityToken(Http(), lambda: "http://imds/token", "https://management.azure.com/", "id-1",  # type: ignore[arg-type]
                              lambda: clock[0])
    assert tokens.get() == "a" and tokens.get() == "a" and len(fetched) == 1
    clock[0] += 3600 - 300 - 1
    assert tokens.get() == "a"
    clock[0] += 1
    assert tokens.get() == "b" and len(fetched) == 2
    assert "client_id=id-1" in fetched[0] and fetched[0].startswith("http://imds/token?")
