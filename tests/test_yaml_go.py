"""Scalars read as Pulumi's loader reads them: gopkg.in/yaml.v3 v3.0.1 (pulumi/pulumi sdk/go.mod), resolve.go.

The first table is go-yaml's own: inputs and expected values of decode_test.go `unmarshalTests` (v3.0.1) that
decode into `map[string]interface{}`, run through our resolver. The second holds the YAML 1.1 forms PyYAML
reads differently (sexagesimal, yes/no/on/off, `=`, 0o octals). The third is what the program then receives
through Go's encoding/json and json.loads (sdk/go/common/resource/config/object.go).
"""

from __future__ import annotations

import math
from typing import Any

import pytest
import yaml

from gpucluster.errors import SpecError
from gpucluster.spec import yaml_go
from gpucluster.spec.yaml_text import Composer, load_yaml, scalar

INF = math.inf
GO_DECODE_TESTS: list[tuple[str, Any]] = [
    # (document, expected) from go-yaml/yaml v3.0.1 decode_test.go unmarshalTests
    ("v: hi", "hi"), ("v: true", True), ("v: 10", 10), ("v: 0b10", 2), ("v: 0xA", 10), ("v: 4294967296", 4294967296),
    ("v: 0.1", 0.1), ("v: .1", 0.1), ("v: .Inf", INF), ("v: -.Inf", -INF), ("v: -10", -10), ("v: -.1", -0.1),
    ("v: 6.8523e+5", 6.8523e+5), ("v: 685.230_15e+03", 685.23015e+03), ("v: 685_230.15", 685230.15),
    ("v: -.inf", -INF), ("v: True", True), ("v: False", False), ("v: TRUE", True), ("v: FALSE", False),
    ("v: 685230", 685230), ("v: +685_230", 685230), ("v: 02472256", 685230), ("v: -02472256", -685230),
    ("v: 0o2472256", 685230), ("v: -0o2472256", -685230), ("v: 0x_0A_74_AE", 685230),
    ("v: 0b1010_0111_0100_1010_1110", 685230), ("v: -0b101010", -42),
    ("v: -0b1000000000000000000000000000000000000000000000000000000000000000", -9223372036854775808),
    ("v:", None), ("v: ~", None), ("v: null", None), ("v: !!float '1.1'", 1.1), ("v: !!float 0", 0.0),
    ("v: !!float -1", -1.0), ("v: !!null ''", None), ("v: ! test", "test"), ("v: -b_c", "-b_c"),
    ("v: +b_c", "+b_c"), ("v: 50cent_of_dollar", "50cent_of_dollar"), ("v: !!str 2015-01-01", "2015-01-01"),
    ("v: \"2015-01-01\"", "2015-01-01"),
]
YAML_1_1_FORMS: list[tuple[str, Any]] = [
    # resolve.go: "Base 60 floats are a bad idea, were dropped in YAML 1.2, and are purposefully unsupported"
    ("v: 1:00", "1:00"), ("v: 190:20:30.15", "190:20:30.15"),
    # the 'M' hint finds only true/false/null spellings in the map: YAML 1.1 booleans are text
    ("v: yes", "yes"), ("v: no", "no"), ("v: on", "on"), ("v: off", "off"), ("v: y", "y"), ("v: Yes", "Yes"),
    ("v: =", "="), ("v: 0o17", 15), ("v: 017", 15), ("v: 0x1F", 31), ("v: 1_000", 1000),
    ("v: 08", 8.0),  # not octal, not an int: yamlStyleFloat matches and ParseFloat gives 8
    ("v: 1e400", "1e400"),  # ParseFloat's range error: text
    ("v: 0x", "0x"), ("v: +", "+"), ("v: .", "."), ("v: 1.2.3", "1.2.3"), ("v: 2001-02-30", "2001-02-30"),
    ("v: 99999999999999999999", 1e20),  # past uint64: a float
    ("v: 18446744073709551615", 18446744073709551615),  # uint64
]


def _go_value(document: str) -> Any:
    """The value yaml.v3 resolves for `v`, before any JSON."""
    node = yaml.compose(document, Loader=Composer).value[0][1]
    return scalar(node)[1]


@pytest.mark.parametrize(("document", "expected"), GO_DECODE_TESTS + YAML_1_1_FORMS,
                         ids=[d for d, _ in GO_DECODE_TESTS + YAML_1_1_FORMS])
def test_scalars_resolve_as_yaml_v3_resolves_them(document: str, expected: Any) -> None:
    got = _go_value(document)
    assert got == expected and type(got) is type(expected), (got, expected)


@pytest.mark.parametrize(("document", "expected"), [
    ("v: 1:00", "1:00"), ("v: yes", "yes"), ("v: 0o17", 15), ("v: 2.0", 2), ("v: 1e3", 1000), ("v: 0.5", 0.5),
    ("v: 1e21", 1e21), ("v: 1.5e-7", 1.5e-7), ("v: 2015-01-01", "2015-01-01 00:00:00 +0000 UTC"),
    ("v: 2001-12-14t21:59:43.10-05:00", "2001-12-14 21:59:43.1 -0500 -0500"),
    ("v: 2015-02-24 18:19:39", "2015-02-24 18:19:39 +0000 UTC"), ("v: !!binary aGk=", "hi"),
    ("v: !!set {a, b}", {"a": None, "b": None}), ("v: !!int '0x10'", 16), ("v: !custom x", "x"),
    ("{1: a, true: b, ~: c, 1.5: d, 1e6: e}", {"1": "a", "true": "b", "<nil>": "c", "1.5": "d", "1e+06": "e"}),
])
def test_the_program_receives_what_encoding_json_and_json_loads_make_of_it(document: str, expected: Any) -> None:
    got = load_yaml(document.encode(), "f")
    value = got if not document.startswith("v:") else got["v"]
    assert value == expected and type(value) is type(expected), (value, expected)


@pytest.mark.parametrize(("document", "message"), [
    ("v: .nan", ".nan cannot be stored in a Pulumi config object"),
    ("v: [1, .inf]", ".inf cannot be stored"),
    ("v: !!int two", "cannot decode !!str `two` as a !!int"),
    ("v: !!bool yes", "cannot decode !!str `yes` as a !!bool"),
    ("v: !!float 1.5.1", "cannot decode !!str `1.5.1` as a !!float"),
    ("v: !!binary '%%%'", "!!binary value contains invalid base64 data"),
    ("a: &a {b: *a}", "anchor value contains itself"),
    ("a: &a {<<: *a}", "anchor value contains itself"),
    ("a: 1\na: 2", "duplicate key 'a'"),
    ("{1: a, '1': b}", "duplicate key '1'"),
    ("{1: a, 0x1: b}", "keys '1' collide"),
    ("<<: [1, 2]", "map merge requires map or sequence of maps"),
])
def test_what_yaml_v3_or_pulumi_refuses_is_one_line(document: str, message: str) -> None:
    with pytest.raises(SpecError) as caught:
        load_yaml(document.encode(), "Pulumi.x.yaml")
    line = str(caught.value.problems[0])
    assert message in line and "\n" not in line and line.startswith("Pulumi.x.yaml: invalid YAML at line "), line


def test_merge_keys_follow_decode_go() -> None:
    """decode.go mapping()/merge(): the mapping's own keys win, then the merged mappings in order, nested merges
    included; a quoted "<<" is an ordinary key."""
    document = (b"base: &base {a: 1, b: 1, c: 1}\nmore: &more {<<: *base, c: 2, d: 2}\n"
                b"x: {<<: [*more, {a: 3, e: 3}], b: 4}\ny: {'<<': text}\n")
    got = load_yaml(document, "f")
    assert got["x"] == {"a": 1, "b": 4, "c": 2, "d": 2, "e": 3}
    assert got["y"] == {"<<": "text"}


def test_go_float_formatting_is_strconv_g() -> None:
    """strconv.FormatFloat(f, 'g', -1, 64), as fmt's %v prints a float key."""
    cases = {1e6: "1e+06", 100000.0: "100000", 123456789.0: "1.23456789e+08", 0.0001: "0.0001", 1e-5: "1e-05",
             2.0: "2", -0.0: "-0", 3.14: "3.14", 1e100: "1e+100"}
    assert {value: yaml_go.go_float_g(value) for value in cases} == cases
