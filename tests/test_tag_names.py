"""A user's tag never collides with a tag the library writes on the same resource.

Azure compares tag names ignoring case (learn.microsoft.com azure-resource-manager/management/tag-resources:
"Tag names are case-insensitive for operations. A tag with a tag name, regardless of the casing, is updated or
retrieved"), so `GPUCLUSTER-ROLE` would overwrite the role tag the policy pack reads. The library's names are
read from a real run: every resource that carries the user's tags, and every other tag it carries.
"""

from __future__ import annotations

import pytest

from gpucluster.offline.engine import run_program
from gpucluster.offline.preview import preview_document
from gpucluster.spec import load_stack_file
from gpucluster.spec.consumer_rules import check_tags
from tests.support.stacks import ROOT, STACKS

PROBE = "probe-owner"


def _library_tag_names() -> set[str]:
    stack = load_stack_file(STACKS / "Pulumi.dev.yaml", "dev")
    stack.config["gpucluster:cluster"]["tags"] = {PROBE: "platform"}
    steps = preview_document(run_program(ROOT / "__main__.py", "gpucluster", "dev", stack.config))["steps"]
    names: set[str] = set()
    for step in steps:
        tags = step["newState"].get("inputs", {}).get("tags")
        if isinstance(tags, dict) and PROBE in tags:
            names |= set(tags) - {PROBE}
    return names


def test_every_library_tag_beside_the_users_is_refused_in_any_case() -> None:
    names = _library_tag_names()
    assert {"gpucluster-cluster", "gpucluster-role", "gpucluster-kubernetes-version"} <= names
    for name in sorted(names):
        for variant in (name, name.upper(), name.title()):
            with pytest.raises(ValueError, match="is the library's own"):
                check_tags({variant: "x"}, reserved=5)


def test_names_of_ones_own_pass() -> None:
    assert check_tags({"Owner": "a", "cost-centre": "4711", "gpucluster": "x"}, reserved=5)
