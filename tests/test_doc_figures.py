"""Figures the docs state, read from the code that makes them: the policy pack's size, prod's address entries (the
golden file, which `python -m tools.golden` writes from a plan) and the stacks `plan --help` names. A change to the
code that moves one fails here until the docs say the same."""

from __future__ import annotations

import json
import re

from pulumi_policy import EnforcementLevel

from gpucluster.cli import parser
from gpucluster.policies.rules import ALL_POLICIES
from tests.support.stacks import ROOT, STACKS
from tools.golden import GOLDEN

MANDATORY = [p for p in ALL_POLICIES if p.enforcement_level == EnforcementLevel.MANDATORY]


def _read(path: str) -> str:
    return (ROOT / path).read_text(encoding="utf-8")


def test_the_pack_size_the_docs_state() -> None:
    assert re.findall(r"The policy pack \((\d+) mandatory rules", _read("README.md")) == [str(len(MANDATORY))]
    assert re.findall(r"the bring-up simulation, (\d+) policies\)", _read("docs/performance.md")) == [
        str(len(ALL_POLICIES))]


def test_prods_address_entries_where_the_docs_state_them() -> None:
    entries = json.loads(GOLDEN.read_text(encoding="utf-8"))["prod"]["ipPlan"]["entries"]["vnet"]
    stated = {
        "stacks/Pulumi.prod.yaml": re.findall(r"for ([\d,]+) of the VNet's 65,536 address entries",
                                              " ".join(_read("stacks/Pulumi.prod.yaml").split())),
        "README.md": re.findall(r"for ([\d,]+) of the VNet's 65,536 address entries", _read("README.md")),
        "docs/ip-plan.md": re.findall(r"\*\*total\*\* \| [\d,]+ \| \| \| \*\*([\d,]+) of 65,536", _read("docs/ip-plan.md")),
    }
    assert stated == {path: [f"{entries:,}"] for path in stated}


def test_plan_help_names_the_stacks_under_stacks() -> None:
    help_text = " ".join(parser()._subparsers._group_actions[0].choices["plan"].format_help().split())  # type: ignore[union-attr]
    names = sorted(p.name.removeprefix("Pulumi.").removesuffix(".yaml") for p in STACKS.glob("Pulumi.*.yaml"))
    assert f"a stack name under stacks/ ({', '.join(names)})" in help_text


def test_configuration_lists_every_top_level_key_once() -> None:
    """docs/configuration.md's key table: every key of `gpucluster:cluster` (the spec's own names), none twice."""
    from gpucluster.spec import ClusterSpec

    table = _read("docs/configuration.md").split("\n## ", 1)[0]
    cells = re.findall(r"^\| ([^|]+) \|", table, re.M)[1:]  # the first column, past the header
    listed = {re.split(r"[.\[]", name)[0] for cell in cells for name in re.findall(r"`([^`]+)`", cell)}
    keys = {f.alias or n for n, f in ClusterSpec.model_fields.items()}
    assert sorted(keys - listed) == [] and len(cells) == len(set(cells)), [c for c in cells if cells.count(c) > 1]


def test_images_md_lists_what_each_image_pre_pulls() -> None:
    from gpucluster.catalog.node_images import prepull_images

    table = _read("docs/images.md").split("| image | pre-pulled |", 1)[1].split("\n\n", 1)[0]
    stated: dict[str, list[str]] = {}
    for definitions, images in re.findall(r"^ *\| (`[^|]+) \| ([^|]+) \|$", table, re.M):
        names = [] if images.startswith("none") else [re.sub(r" \(.*", "", n) for n in images.split(", ")]
        stated |= {d: names for d in re.findall(r"`([a-z]+)`", definitions)}
    shipped = {d: [ref.split("@")[0].rsplit(":", 1)[0].rsplit("/", 1)[1] for ref in prepull_images(d, "1.36.4")]
               for d in ("gpu", "rack", "confidential", "cpu", "apiserver", "etcd")}
    assert stated == shipped
