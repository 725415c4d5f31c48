"""The policy props proxy built as rules read it behaves as pulumi_policy's own `unknown_checking_proxy`
(pulumi_policy/proxy.py, pulumi-policy 1.21.0, the proxy the Pulumi CLI's analyzer wraps props in): the same
types, values and UnknownValueError paths, without copying the document."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pytest
from pulumi_policy.proxy import UnknownValueError, unknown_checking_proxy

from gpucluster.catalog.preview_values import UNKNOWN, UNKNOWN_MARK
from gpucluster.offline.lazy_props import lazy_props

INPUTS: dict[str, Any] = {
    "sku": {"name": "Standard_D4s_v5", "capacity": 3},
    "zones": ["1", "2"],
    "tags": {"gpucluster-role": "gpu", "owner": UNKNOWN},
    "networkProfile": {"interfaces": [{"id": "nic-0", "ips": [UNKNOWN, "10.0.0.4"]}, {"id": UNKNOWN}]},
    "empty": {}, "none": None, "unknownList": UNKNOWN,
}

READS: dict[str, Callable[[Any], Any]] = {
    "nested value": lambda p: p["sku"]["capacity"],
    "list item": lambda p: p["zones"][1],
    "negative index": lambda p: p["zones"][-1],
    "get with default": lambda p: p.get("missing", "default"),
    "get of unknown": lambda p: p["tags"].get("owner"),
    "in": lambda p: ("sku" in p, "missing" in p),
    "keys": lambda p: sorted(p),
    "len": lambda p: (len(p), len(p["zones"]), len(p["networkProfile"]["interfaces"])),
    "types": lambda p: (isinstance(p, Mapping), isinstance(p["zones"], Sequence), isinstance(p["zones"], list)),
    "iterate a list": lambda p: [i["id"] for i in p["networkProfile"]["interfaces"][:1]],
    "unknown in a list": lambda p: list(p["networkProfile"]["interfaces"][0]["ips"]),
    "unknown in an object": lambda p: p["networkProfile"]["interfaces"][1]["id"],
    "unknown top level": lambda p: p["unknownList"],
    "items": lambda p: [k for k, _ in p["sku"].items()],
    "values with an unknown": lambda p: list(p["tags"].values()),
    "equality": lambda p: (p["sku"] == {"name": "Standard_D4s_v5", "capacity": 3}, p["zones"] == ["1", "2"]),
    "slice": lambda p: [type(x).__name__ for x in p["networkProfile"]["interfaces"][0]["ips"][0:2]],
    "index past the end": lambda p: p["zones"][5],
    "missing key": lambda p: p["sku"]["tier"],
    "none": lambda p: p["none"],
}


def _outcome(read: Callable[[Any], Any], props: Any) -> Any:
    try:
        return ("value", read(props))
    except UnknownValueError as error:
        return ("unknown", error.props, error.message)
    except (KeyError, IndexError) as error:
        return (type(error).__name__, str(error))


@pytest.mark.parametrize("name", sorted(READS))
def test_reads_give_what_the_eager_proxy_gives(name: str) -> None:
    assert _outcome(READS[name], lazy_props(INPUTS)) == _outcome(READS[name], unknown_checking_proxy(INPUTS))


def test_the_engines_unknown_marker_reads_as_unknown_and_nothing_is_copied() -> None:
    inputs = {"a": {"b": UNKNOWN_MARK}}
    props = lazy_props(inputs)
    with pytest.raises(UnknownValueError) as raised:
        props["a"]["b"]  # the read is the test
    assert raised.value.props == ["a", "b"]
    assert props["__target"] is inputs and props["a"]["__target"] is inputs["a"]
    with pytest.raises(TypeError):
        props["a"]["b"] = "changed"  # type: ignore[index]
    assert inputs == {"a": {"b": UNKNOWN_MARK}}
