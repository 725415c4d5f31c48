"""The wait for the node scale sets' long-running operations, as one dynamic resource for the whole cluster.

Pulumi's dynamic-provider host serves every RPC from `ThreadPoolExecutor(max_workers=4)` (pulumi 3.272
`pulumi/dynamic/__main__.py` main()). The scale sets' create and update return once ARM accepted the write
(components/azure/scale_set/provider.py), and this resource's create and update wait for all of them inside one
RPC, polling each one's operation on a thread of its own (at most `concurrency` at once): one worker for the length
of the slowest allocation, instead of one worker per scale set.

Inputs: `scaleSets`, one entry per scale set ({name, id, operation, vmSize, zone}: `operation` is the URL of its last
write's operation, a scale set's output), `deadlineSeconds`, `concurrency`. The create waits for every entry, the
update for the entries that changed (a scale set written again); an entry whose operation the wait already saw
succeed is not polled again.

Polling follows azure-core's ARM poller: a GET of the operation URL through the client's pipeline (the bearer token,
the retry policy for 429 and 5xx), then the `Retry-After` the answer carries, else the polling interval (azure-core
1.41 `polling/base_polling.py` `_extract_delay`: `get_retry_after(...)`, else the configured timeout); an
Azure-AsyncOperation status of Succeeded, Failed or Canceled ends it (ARM's async-operation status values), a
Location URL ends on any answer but 202. Then a GET of the scale set itself reads its provisioningState. An operation
ARM no longer knows (404) leaves the scale set's provisioningState to say. At the deadline, what has not ended is
reported as such.

Failures are one line naming each scale set that did not come up, its ARM error code and the fix
(components/catalog/allocation_failures.py). The resource then is not in the state; the scale sets are, Failed,
and `pulumi up --refresh` re-PUTs them (the refresh reads Failed, the scale set's diff asks for an update) and
waits again.

Nothing of this resource lives in Azure: read returns what it recorded, delete has nothing to delete.
"""

from __future__ import annotations

import email.utils
import math
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from pulumi.dynamic import CheckFailure, CheckResult, CreateResult, DiffResult, ReadResult, UpdateResult

from gpucluster.azure.scale_set.arm_client import ComputeProvider
from gpucluster.azure.scale_set.provider import PROVISIONING_STATE, parse_id, resource_id
from gpucluster.azure.scale_set.routes import PROVIDER_INPUT, SCALE_SET_API_VERSION
from gpucluster.catalog.allocation_failures import fix

SCALE_SETS = "scaleSets"
DEADLINE = "deadlineSeconds"
CONCURRENCY = "concurrency"
SDK_POLLING_SECONDS = 30.0
"""azure-mgmt-compute 39.0.0 `_configuration.py`: `polling_interval` defaults to 30 (seconds)."""
TERMINAL = ("Succeeded", "Failed", "Canceled")
"""ARM's terminal statuses of an async operation (azure-mgmt-core `polling/arm_polling.py`, azure-core
`polling/base_polling.py` `_FINISHED`/`_FAILED`)."""
SUCCEEDED = "Succeeded"


class ScaleSetsNotReadyError(RuntimeError):
    """One or more scale sets did not come up: one line, each with its error code and the fix."""


@dataclass(frozen=True)
class Outcome:
    name: str
    state: str
    """Succeeded, Failed, Canceled, or the provisioningState still in progress at the deadline."""
    code: str | None = None
    timed_out: bool = False


def retry_after(headers: Any) -> float | None:
    """Seconds from `Retry-After` (delta-seconds or an HTTP date) or `retry-after-ms`, as azure-core's
    `get_retry_after` reads them; None when absent or unreadable."""
    value = headers.get("Retry-After")
    if value:
        try:
            return _seconds(float(value))
        except ValueError:
            moment = email.utils.parsedate_to_datetime(value) if email.utils.parsedate_tz(value) else None
            return max(moment.timestamp() - time.time(), 0.0) if moment is not None else None
    for ms_header in ("retry-after-ms", "x-ms-retry-after-ms"):
        value = headers.get(ms_header)
        if value:
            try:
                return _seconds(float(value) / 1000.0)
            except ValueError:
                return None
    return None


def _seconds(value: float) -> float | None:
    """A delay to sleep: never negative; None for `nan` or an infinity (float() reads both, and sleep(nan) raises)."""
    return max(value, 0.0) if math.isfinite(value) else None


def changed_entries(olds: dict[str, Any], news: dict[str, Any]) -> list[dict[str, Any]]:
    """The entries of `news` that `olds` did not wait for (new, or written again: another id or operation)."""
    waited = {(e.get("name"), e.get("id"), e.get("operation")) for e in olds.get(SCALE_SETS) or []}
    return [e for e in news.get(SCALE_SETS) or [] if (e.get("name"), e.get("id"), e.get("operation")) not in waited]


def failure_line(outcomes: list[Outcome], entries: list[dict[str, Any]], deadline: float) -> str:
    """One line: each scale set that did not come up, how, and the fix."""
    by_name = {e["name"]: e for e in entries}
    parts = []
    for outcome in outcomes:
        entry = by_name[outcome.name]
        size, zone = str(entry.get("vmSize")), str(entry.get("zone"))
        if outcome.timed_out:
            parts.append(f"{outcome.name} still {outcome.state} after {deadline:g} s (run `pulumi up` again to wait "
                         "on: the operation goes on in Azure)")
        else:
            parts.append(f"{outcome.name} ended {outcome.state} with {outcome.code or 'no error code'} "
                         f"({fix(outcome.code, size, zone)})")
    return f"{len(outcomes)} of {len(entries)} node scale sets did not come up: {'; '.join(parts)}"


class ScaleSetsReadyProvider(ComputeProvider):
    """Waits, in one RPC, for the long-running operations of every node scale set the program declares."""

    clock: Callable[[], float] = staticmethod(time.monotonic)
    """Seconds, for the deadline (a test gives a clock of its own)."""
    sleep: Callable[[float], None] = staticmethod(time.sleep)

    def check(self, _olds: dict[str, Any], news: dict[str, Any]) -> CheckResult:
        failures = []
        entries = news.get(SCALE_SETS)
        if not isinstance(entries, list) or not all(isinstance(e, dict) and isinstance(e.get("name"), str)
                                                    for e in entries):
            failures.append(CheckFailure(SCALE_SETS, "a list of {name, id, operation, vmSize, zone}, one per scale set"))
        elif len({e["name"] for e in entries}) != len(entries):
            failures.append(CheckFailure(SCALE_SETS, "each scale set once"))
        for key in (DEADLINE, CONCURRENCY):
            value = news.get(key)
            if not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0:
                failures.append(CheckFailure(key, f"{key} must be a positive number"))
        return CheckResult(news, failures)

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        before = {k: v for k, v in olds.items() if k != PROVIDER_INPUT}
        after = {k: v for k, v in news.items() if k != PROVIDER_INPUT}
        return DiffResult(changes=before != after, replaces=[], stables=[], delete_before_replace=False)

    def create(self, props: dict[str, Any]) -> CreateResult:
        self._wait(props[SCALE_SETS], props)
        return CreateResult("nodes-ready", self._outputs(props))

    def update(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        self._wait(changed_entries(olds, news), news)
        return UpdateResult(self._outputs(news))

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        outputs = self._outputs(props)
        return ReadResult(id_, outputs, outputs)

    def delete(self, _id: str, _props: dict[str, Any]) -> None:
        return

    @staticmethod
    def _outputs(props: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in props.items() if k != PROVIDER_INPUT}

    def _wait(self, entries: list[dict[str, Any]], props: dict[str, Any]) -> None:
        if not entries:
            return
        seconds = float(props[DEADLINE])
        deadline = self.clock() + seconds
        # One client per subscription, shared by the threads (azure-core's pipeline serves concurrent requests).
        clients = {sub: self._client(sub) for sub in sorted({parse_id(str(e["id"]))["subscriptionId"] for e in entries})}
        with ThreadPoolExecutor(max_workers=min(int(props[CONCURRENCY]), len(entries))) as pool:
            outcomes = list(pool.map(lambda entry: self._wait_one(clients, entry, deadline), entries))
        bad = [o for o in outcomes if o.state != SUCCEEDED]
        if bad:
            raise ScaleSetsNotReadyError(failure_line(bad, entries, seconds))

    def _interval(self) -> float:
        return self.polling_interval if self.polling_interval is not None else SDK_POLLING_SECONDS

    def _wait_one(self, clients: dict[str, Any], entry: dict[str, Any], deadline: float) -> Outcome:
        """Polls one scale set's operation until it ends or the deadline passes, then reads the scale set; an
        answer ARM refuses (after the retry policy) is that scale set's outcome, not the end of the others' wait."""
        from azure.core.exceptions import AzureError, HttpResponseError

        try:
            return self._poll(clients, entry, deadline)
        except HttpResponseError as error:
            code = getattr(getattr(error, "error", None), "code", None) or f"HTTP {error.status_code}"
            return Outcome(entry["name"], "unreadable", code)
        except AzureError as error:  # no answer at all (connection refused, timeout), after the retry policy
            return Outcome(entry["name"], "unreadable", type(error).__name__)

    def _poll(self, clients: dict[str, Any], entry: dict[str, Any], deadline: float) -> Outcome:
        from azure.core.rest import HttpRequest

        where = parse_id(str(entry["id"]))
        client = clients[where["subscriptionId"]]
        operation, code = entry.get("operation"), None
        while isinstance(operation, str):
            answer = client.send_request(HttpRequest("GET", operation))
            if answer.status_code == 404:
                break  # ARM no longer keeps the operation: the scale set's provisioningState says how it ended
            answer.raise_for_status()
            if answer.status_code != 202:  # an Azure-AsyncOperation status, or a Location that answered
                document = answer.json() if answer.content else {}
                status = document.get("status") if isinstance(document, dict) else None
                if status in TERMINAL or status is None:
                    code = (document.get("error") or {}).get("code") if status in ("Failed", "Canceled") else None
                    break
            # A Retry-After past the deadline (36000) is cut to it: the wait polls once more at its deadline and
            # never outlives it, so "after <deadline> s" in the failure line is the time it waited.
            left = deadline - self.clock()
            if left <= 0:
                return Outcome(entry["name"], self._state(client, where), timed_out=True)
            self.sleep(min(retry_after(answer.headers) or self._interval(), left))
        while True:
            state = self._state(client, where)
            if state in TERMINAL:
                return Outcome(entry["name"], state, code)
            left = deadline - self.clock()
            if left <= 0:
                return Outcome(entry["name"], state, timed_out=True)
            self.sleep(min(self._interval(), left))

    @staticmethod
    def _state(client: Any, where: dict[str, str]) -> str:
        """The scale set's provisioningState, from a GET read as JSON: only that field is needed, and building the
        SDK's model of a whole scale set costs more CPU than the request."""
        from azure.core.rest import HttpRequest

        answer = client.send_request(HttpRequest("GET", resource_id(where), params={
            "api-version": SCALE_SET_API_VERSION}))
        answer.raise_for_status()
        return str((answer.json().get("properties") or {}).get(PROVISIONING_STATE))
