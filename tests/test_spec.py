"""ClusterSpec validation: every problem is one line naming its YAML path."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpucluster.errors import SpecError
from gpucluster.spec import load_stack_file, parse_cluster
from tests.support.stacks import small_cluster


def problems(raw: object) -> list[str]:
    with pytest.raises(SpecError) as caught:
        parse_cluster(raw)
    return [str(p) for p in caught.value.problems]


def test_shipped_stacks_validate(prod_spec, dev_spec) -> None:
    assert prod_spec.name == "prod" and {"h100", "confidential", "cpu", "system"} <= {p.name for p in prod_spec.pools}
    assert dev_spec.control_plane.events_etcd is None


def test_unknown_key_names_path_and_known_keys() -> None:
    raw = small_cluster()
    raw["pools"][1]["vmsize"] = "x"
    [line] = problems(raw)
    assert line.startswith("cluster.pools[1].vmsize: unknown key")
    assert "vmSize" in line


def test_negative_count_and_wrong_type() -> None:
    raw = small_cluster()
    raw["pools"][1]["count"] = -3
    raw["pools"][0]["podsPerNode"] = "many"
    lines = problems(raw)
    assert "cluster.pools[1].count: must be >= 1 (got -3)" in lines
    assert any(line.startswith("cluster.pools[0].podsPerNode: must be a whole number") for line in lines)


def test_missing_required_key() -> None:
    raw = small_cluster()
    del raw["network"]
    assert problems(raw) == ["cluster.network: is required; add it"]


def test_cidr_with_host_bits() -> None:
    raw = small_cluster(network={"addressSpace": ["10.0.0.1/16"]})
    [line] = problems(raw)
    assert line.startswith("cluster.network.addressSpace[0]: must be an IPv4 network")


def test_frozen() -> None:
    spec = parse_cluster(small_cluster())
    with pytest.raises(ValueError):
        spec.name = "other"  # type: ignore[misc]


def test_limit_override_needs_a_note() -> None:
    raw = small_cluster(limits={"privateIpsPerVnet": {"value": 100000}})
    assert problems(raw) == ["cluster.limits.privateIpsPerVnet.note: is required; add it"]


def test_balloon_needs_exactly_one_reserve() -> None:
    raw = small_cluster(balloons=[{"pool": "gpu", "nodes": 2, "fraction": 0.1}])
    assert problems(raw) == ["cluster.balloons[0]: set exactly one of `nodes` or `fraction`"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", "the file is empty"),
        ("config: [unclosed", "invalid YAML at line"),
        ("config:\n  other:key: 1\n", "cluster: missing: add the structured key `gpucluster:cluster`"),
        ("just a string", "needs a top-level `config:` mapping"),
        ("config:\n  gpucluster:cluster:\n    name: {secure: AAEA}\n", "holds an encrypted value"),
    ],
)
def test_broken_stack_files(tmp_path: Path, text: str, expected: str) -> None:
    path = tmp_path / "Pulumi.bad.yaml"
    path.write_text(text)
    with pytest.raises(SpecError) as caught:
        load_stack_file(path, "bad")
    assert expected in str(caught.value)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="stack file not found"):
        load_stack_file(tmp_path / "Pulumi.nope.yaml", "nope")
