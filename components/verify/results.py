"""One verdict of a check: what was checked, pass/fail/skip, what to do on a failure and where the rule comes from."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any, Literal

from gpucluster.results import Severity
from gpucluster.verify.bounds import BoundError

Status = Literal["pass", "fail", "skip"]


SEVERITY: dict[Status, Severity] = {"fail": Severity.ERROR, "skip": Severity.NOTE, "pass": Severity.NOTE}


@dataclass(frozen=True)
class Result:
    """One verdict, in the vocabulary of components/results.py; its severity follows from its status."""

    check: str
    """The check's name (`azure.sizes`, `cluster.dns`), as printed and in `--json`."""
    path: str
    """What this verdict is about: a size in a zone, a scale set, a node."""
    status: Status
    message: str
    """What was found (on a pass too: the evidence)."""
    fix: str = ""
    """What to do about a failure (empty on a pass)."""
    source: str = ""
    """Where the rule or the expectation comes from (a file of this project, a consumer's source, Microsoft's docs)."""

    @property
    def severity(self) -> Severity:
        return SEVERITY[self.status]

    def as_dict(self) -> dict[str, Any]:
        """`--json`'s row."""
        return {"check": self.check, "subject": self.path, "status": self.status, "detail": self.message,
                "fix": self.fix, "source": self.source}


class Check:
    """Builds the verdicts of one named check with its source."""

    def __init__(self, name: str, source: str) -> None:
        self.name = name
        self.source = source

    def passed(self, subject: str, detail: str, source: str | None = None) -> Result:
        return Result(self.name, subject, "pass", detail, "", source or self.source)

    def failed(self, subject: str, detail: str, fix: str, source: str | None = None) -> Result:
        return Result(self.name, subject, "fail", detail, fix, source or self.source)

    def skipped(self, subject: str, detail: str, source: str | None = None) -> Result:
        return Result(self.name, subject, "skip", detail, "", source or self.source)


def failures(results: Iterable[Result]) -> list[Result]:
    return [r for r in results if r.status == "fail"]


def guarded(name: str, run: Callable[[], list[Result]], refused: type[Exception],
            unreachable: tuple[type[Exception], ...]) -> list[Result]:
    """Run one check; a write the guard refused, or a service that does not answer, is that check's failure and
    the others still run."""
    try:
        return run()
    except BoundError as error:
        return [bound_failure(name, error)]
    except refused as error:
        fix = "nothing was changed; report this (a check must only read)"
        if "/register" in str(error):
            namespace = str(error).split("/providers/")[-1].split("/register")[0]
            fix = (f"nothing was changed: the ARM SDK answers MissingSubscriptionRegistration by registering the "
                   f"provider itself; register it: az provider register --namespace {namespace} --wait")
        return [Result(name, "read-only guard", "fail", f"refused a write before it was sent: {error}", fix,
                       "components/verify/readonly.py")]
    except unreachable as error:
        text = " ".join(str(error).split())[:400]
        return [Result(name, "request", "fail", f"could not read: {type(error).__name__}: {text}",
                       "check the credentials' read access and the network path to the service, then run again",
                       "")]
    except Exception as error:  # an answer of a shape the check does not expect: its verdict, not a traceback
        text = " ".join(str(error).split())[:400]
        return [Result(name, "check", "fail", f"the check could not interpret what it read: {type(error).__name__}: "
                       f"{text}", "report this with the --json output", "")]


def bound_failure(name: str, error: BoundError) -> Result:
    return Result(name, f"bound: {error.bound}", "fail", str(error),
                  "verify stopped here so that it ends: look at what the service answers (a proxy in the path, a "
                  "server looping its pages, a throttled subscription), then run again; the bounds are listed in "
                  "docs/operations.md", "components/verify/bounds.py")


REDACTED = "***"


def redacted(results: list[Result], secrets: Iterable[str]) -> list[Result]:
    """The verdicts with every secret the run sent (a bearer token) replaced by `***`: a server that echoes the
    caller's request in an error body must not put the token on the terminal or in `--json`."""
    words = sorted({s for s in secrets if len(s) >= 8}, key=len, reverse=True)  # the longest first

    def clean(text: str) -> str:
        for word in words:
            text = text.replace(word, REDACTED)
        return text

    return [replace(r, path=clean(r.path), message=clean(r.message), fix=clean(r.fix), source=clean(r.source))
            for r in results] if words else results
