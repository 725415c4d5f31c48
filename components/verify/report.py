"""Verdicts for people (one line each; a failure adds its fix and source) and for CI (`--json`)."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from rich.console import Console

from gpucluster.verify.results import Result

LABEL = {"pass": "PASS", "fail": "FAIL", "skip": "SKIP"}


def summary(results: list[Result]) -> dict[str, int]:
    counts = Counter(r.status for r in results)
    return {status: counts.get(status, 0) for status in ("pass", "fail", "skip")}


def document(stack: str, subscription: str, cluster: str, results: list[Result]) -> dict[str, Any]:
    return {"stack": stack, "subscription": subscription, "cluster": cluster, "summary": summary(results),
            "results": [r.as_dict() for r in results]}


def print_results(console: Console, stack: str, subscription: str, cluster: str, results: list[Result]) -> None:
    def say(text: str) -> None:
        console.print(text, markup=False, highlight=False, soft_wrap=True)

    say(f"verify {stack}: subscription {subscription}, cluster {cluster}")
    width = max((len(r.check) for r in results), default=0)
    for result in results:
        say(f"{LABEL[result.status]} {result.check:<{width}}  {result.path}: {result.message}")
        if result.status == "fail":
            say(f"     fix: {result.fix}")
            if result.source:
                say(f"     source: {result.source}")
    counts = summary(results)
    say(f"{len(results)} verdicts: {counts['pass']} passed, {counts['fail']} failed, {counts['skip']} skipped")


def print_json(console: Console, stack: str, subscription: str, cluster: str, results: list[Result]) -> None:
    console.file.write(json.dumps(document(stack, subscription, cluster, results), indent=2, sort_keys=True) + "\n")
