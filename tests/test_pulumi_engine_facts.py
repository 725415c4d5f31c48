"""What the replacement guard and "What a policy can see" rest on in Pulumi's engine, as read by
tools/pulumi_engine_facts.py into components/catalog/facts/consumers/pulumi-engine.json, and in the installed SDK's
dynamic-provider host (pulumi 3.272 `pulumi/dynamic/__main__.py`), read here directly: docs/architecture.md cites each of them.
"""

from __future__ import annotations

import re
from pathlib import Path

import pulumi.dynamic

from gpucluster.catalog.fact_files import load_facts
from tests.support.stacks import ROOT

CATALOGUE = load_facts("consumers/pulumi-engine.json")
ARCHITECTURE = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
HOST = (Path(pulumi.dynamic.__file__).parent / "__main__.py").read_text(encoding="utf-8")


def test_the_catalogue_names_its_commit_and_each_fact_once() -> None:
    assert CATALOGUE["repository"] == "pulumi/pulumi" and re.fullmatch(r"[0-9a-f]{40}", CATALOGUE["commit"])
    names = [f["name"] for f in CATALOGUE["facts"]]
    assert len(names) == len(set(names)) and all(f["line"] > 0 and f["text"] for f in CATALOGUE["facts"])
    assert CATALOGUE["commit"][:10] in ARCHITECTURE


def test_the_engine_analyzes_before_it_diffs() -> None:
    """Both calls are in the same step-generator function; the analyzers run on the inputs first."""
    facts = {f["name"]: f for f in CATALOGUE["facts"]}
    analyze, diff = facts["analyze-before-diff"], facts["diff-after-analyze"]
    assert analyze["path"] == diff["path"] and analyze["line"] < diff["line"]


def test_the_architecture_page_cites_every_file_read() -> None:
    missing = [f["path"] for f in CATALOGUE["facts"] if f["path"].rsplit("/", 1)[-1] not in ARCHITECTURE]
    assert not missing


def test_the_installed_host_is_one_process_with_four_workers_and_sends_the_traceback() -> None:
    """What the guard's lock and the refusal's form rest on, in the host the SDK ships."""
    assert "futures.ThreadPoolExecutor(max_workers=4)" in HOST
    assert "_PROVIDER_LOCK = Lock()" in HOST and "_PROVIDER_CACHE[providerStr] = provider" in HOST
    assert "context.abort(grpc.StatusCode.UNKNOWN, traceback.format_exc())" in HOST
