"""Scalars as Pulumi reads a stack file, not as PyYAML does.

Pulumi loads `Pulumi.<stack>.yaml` with gopkg.in/yaml.v3 v3.0.1 (pulumi/pulumi sdk/go.mod;
sdk/go/common/encoding/marshal.go; workspace/loaders.go LoadProjectStackBytes decodes the file into `any`),
whose resolve.go reads plain scalars by YAML 1.2's core schema with a few YAML 1.1 leftovers: `yes`, `on`,
`1:00` (sexagesimal) and `=` are text; `0o17`, `0x1F`, `017` and `0b101` are integers; `_` separates
digits. PyYAML reads YAML 1.1: `count: 1:00` would be 60 here and the text "1:00" at deploy time.

The config object then reaches the program as JSON (sdk/go/common/resource/config/object.go, Go's
encoding/json; the Python SDK's `require_object` is `json.loads`), which fixes what the program sees: a
whole float such as `2.0` arrives as the integer 2, `.nan` and `.inf` cannot be stored at all, a date
arrives as Go's `time.Time.String()`, and mapping keys are text (`fmt.Sprintf("%v", key)`).
"""

from __future__ import annotations

import base64
import binascii
import math
import re
from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import Any

NULL, BOOL, STR, INT, FLOAT, TIMESTAMP, BINARY, MERGE = (
    "!!null", "!!bool", "!!str", "!!int", "!!float", "!!timestamp", "!!binary", "!!merge")
_RESOLVABLE = {"", STR, BOOL, INT, FLOAT, NULL, TIMESTAMP}
_LONG_PREFIX = "tag:yaml.org,2002:"


class GoYamlError(ValueError):
    """What yaml.v3 fails with (`failf`): Pulumi cannot load the stack file either."""


# resolve.go init(): values looked up whole, for the hints below that are not 0
_MAP: dict[str, tuple[str, Any]] = {
    **{s: (BOOL, True) for s in ("true", "True", "TRUE")},
    **{s: (BOOL, False) for s in ("false", "False", "FALSE")},
    **{s: (NULL, None) for s in ("", "~", "null", "Null", "NULL")},
    **{s: (FLOAT, math.nan) for s in (".nan", ".NaN", ".NAN")},
    **{s: (FLOAT, math.inf) for s in (".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF")},
    **{s: (FLOAT, -math.inf) for s in ("-.inf", "-.Inf", "-.INF")},
    "<<": (MERGE, "<<"),
}
_HINT = {**dict.fromkeys("+-", "S"), **dict.fromkeys("0123456789", "D"), **dict.fromkeys("yYnNtTfFoO~", "M"),
         ".": "."}
_YAML_STYLE_FLOAT = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?")
"""resolve.go yamlStyleFloat; Go's `$` ends the text, so it is used with fullmatch."""
_GO_DOT_FLOAT = re.compile(r"\.[0-9]+(_[0-9]+)*([eE][-+]?[0-9]+(_[0-9]+)*)?")
"""What Go's strconv.ParseFloat accepts from text starting with '.': digits, '_' only between digits."""
_DIGITS = {2: "01", 8: "01234567", 10: "0123456789", 16: "0123456789abcdefABCDEF"}


def short_tag(tag: str) -> str:
    return "!!" + tag[len(_LONG_PREFIX):] if tag.startswith(_LONG_PREFIX) else tag


def _parse_uint(text: str) -> int | None:
    """strconv.ParseUint(text, 0, 64): base prefixes 0b 0o 0x, a leading 0 for octal, no sign."""
    base, digits = 10, text
    if text[:1] == "0":
        prefix = text[1:2].lower()
        if len(text) >= 3 and prefix in ("b", "o", "x"):
            base, digits = {"b": 2, "o": 8, "x": 16}[prefix], text[2:]
        else:
            base, digits = 8, text[1:]
    elif not text:
        return None
    if any(c not in _DIGITS[base] for c in digits):
        return None
    value = int(digits, base) if digits else 0
    return value if value < 1 << 64 else None


def _parse_int(text: str) -> int | None:
    """strconv.ParseInt(text, 0, 64)."""
    sign, rest = (-1, text[1:]) if text[:1] == "-" else (1, text[1:]) if text[:1] == "+" else (1, text)
    value = _parse_uint(rest) if rest else None
    if value is None or (sign > 0 and value >= 1 << 63) or value > 1 << 63:
        return None
    return sign * value


def _parse_float(text: str) -> float | None:
    """strconv.ParseFloat(text, 64) on text already matched by a float pattern; out of range is an error."""
    value = float(text.replace("_", ""))
    return None if math.isinf(value) else value


_TIMESTAMP = re.compile(
    r"(?P<y>[0-9]{4})-(?P<mo>[0-9]{1,2})-(?P<d>[0-9]{1,2})"
    r"(?:(?P<sep>[Tt]| +)(?P<h>[0-9]{1,2}):(?P<mi>[0-9]{1,2}):(?P<s>[0-9]{1,2})(?:[.,](?P<frac>[0-9]+))?"
    r"(?P<zone>Z|[-+][0-9]{2}:[0-9]{2})?)?")


def _parse_timestamp(text: str) -> datetime | None:
    """resolve.go parseTimestamp: Go's time.Parse with its four layouts ("2006-1-2T15:4:5.999999999Z07:00",
    the same with 't', "2006-1-2 15:4:5.999999999", "2006-1-2"); a zone only and always after T or t."""
    match = _TIMESTAMP.fullmatch(text)
    if match is None:
        return None
    sep, zone = match["sep"], match["zone"]
    if sep is not None and (sep[0] == " ") == (zone is not None):
        return None
    try:
        when = datetime(int(match["y"]), int(match["mo"]), int(match["d"]), int(match["h"] or 0),
                        int(match["mi"] or 0), int(match["s"] or 0))
    except ValueError:
        return None  # time.Parse: month, day, hour, minute or second out of range
    nanos = int((match["frac"] or "0")[:9].ljust(9, "0"))
    offset = 0
    if zone and zone != "Z":
        hours, minutes = int(zone[1:3]), int(zone[4:6])
        if hours > 24 or minutes > 60:
            return None
        offset = (1 if zone[0] == "+" else -1) * (hours * 60 + minutes)
    return _GoTime(when, nanos, offset)


class _GoTime(datetime):
    """A parsed timestamp with Go's nanoseconds and offset, printed as Go's time.Time.String()."""

    nanos: int
    offset: int

    def __new__(cls, when: datetime, nanos: int, offset: int) -> _GoTime:
        made = super().__new__(cls, when.year, when.month, when.day, when.hour, when.minute, when.second)
        made.nanos, made.offset = nanos, offset
        return made

    def go_string(self) -> str:
        """"2006-01-02 15:04:05.999999999 -0700 MST". A zero offset prints as UTC (as after Pulumi's round trip
        through RFC 3339 on a machine whose local zone is UTC); another offset is a fixed zone with no name,
        which Go prints as the offset again."""
        text = f"{self.year:04d}-{self.month:02d}-{self.day:02d} {self.hour:02d}:{self.minute:02d}:{self.second:02d}"
        if self.nanos:
            text += "." + f"{self.nanos:09d}".rstrip("0")
        if self.offset == 0:
            return text + " +0000 UTC"
        sign, minutes = ("+" if self.offset > 0 else "-"), abs(self.offset)
        zone = f"{sign}{minutes // 60:02d}{minutes % 60:02d}"
        return f"{text} {zone} {zone}"


def resolve(tag: str, text: str) -> tuple[str, Any]:
    """resolve.go resolve(tag, in): (resolved tag, value). `tag` is "" for an untagged plain scalar."""
    tag = short_tag(tag)
    if tag not in _RESOLVABLE:
        return tag, text
    resolved, value = _resolve(tag, text)
    if tag in ("", resolved, STR, BINARY):
        return resolved, value
    if tag == FLOAT and resolved == INT:
        return FLOAT, float(value)
    raise GoYamlError(f"cannot decode {resolved} `{text}` as a {tag}")


def _resolve(tag: str, text: str) -> tuple[str, Any]:
    hint = _HINT.get(text[:1], "N" if not text else "")
    if not hint or tag in (STR, BINARY):
        return STR, text
    if text in _MAP:
        return _MAP[text]
    if hint == "." and _GO_DOT_FLOAT.fullmatch(text):
        number = _parse_float(text)
        if number is not None:
            return FLOAT, number
    if hint in ("D", "S"):
        if tag in ("", TIMESTAMP):
            when = _parse_timestamp(text)
            if when is not None:
                return TIMESTAMP, when
        plain = text.replace("_", "")
        integer = _parse_int(plain)
        if integer is None and plain[:1] not in "+-":
            integer = _parse_uint(plain) if plain else None
        if integer is not None:
            return INT, integer
        if _YAML_STYLE_FLOAT.fullmatch(plain):
            number = _parse_float(plain)
            if number is not None:
                return FLOAT, number
    return STR, text


def binary_text(text: str) -> str:
    """decode.go: a !!binary scalar decodes (base64.StdEncoding, line breaks dropped) to a Go string, which
    encoding/json writes with U+FFFD for bytes that are not UTF-8."""
    try:
        data = base64.b64decode(re.sub(r"[\r\n]", "", text), validate=True)
    except (binascii.Error, ValueError):
        raise GoYamlError("!!binary value contains invalid base64 data") from None
    return data.decode("utf-8", errors="replace")


def program_value(tag: str, value: Any) -> Any:
    """A resolved scalar as the program receives it after Go's encoding/json and Python's json.loads."""
    if tag == FLOAT:
        if math.isnan(value) or math.isinf(value):
            raise GoYamlError(f"{'.nan' if math.isnan(value) else '.inf'} cannot be stored in a Pulumi config "
                              "object (Go's encoding/json refuses NaN and infinities)")
        # encoding/json writes |f| < 1e21 without exponent, and a whole number without a point: json.loads
        # then gives an int
        return int(value) if value.is_integer() and abs(value) < 1e21 else value
    if isinstance(value, _GoTime):
        return value.go_string()
    if isinstance(value, datetime | date | timedelta):  # pragma: no cover - resolve never makes these
        raise TypeError(value)
    return value


def key_text(tag: str, value: Any) -> str:
    """A mapping key as the program sees it: object.go unmarshalObject turns map[any]any keys into
    fmt.Sprintf("%v", key)."""
    if value is None:
        return "<nil>"
    if isinstance(value, bool):
        return "true" if value else "false"
    if tag == FLOAT:
        return go_float_g(value)
    if isinstance(value, _GoTime):
        return value.go_string()
    return str(value)


def go_float_g(value: float) -> str:
    """strconv.FormatFloat(value, 'g', -1, 64), which `%v` prints: the shortest digits that read back, in
    exponent form when the decimal exponent is below -4 or at least 6 (ftoa.go: "if shortest { eprec = 6 }")."""
    if math.isnan(value) or math.isinf(value):
        return "NaN" if math.isnan(value) else "+Inf" if value > 0 else "-Inf"
    sign = "-" if math.copysign(1.0, value) < 0 else ""
    if value == 0:
        return sign + "0"
    _, digit_tuple, exponent = Decimal(repr(abs(value))).as_tuple()
    digits = "".join(map(str, digit_tuple)).rstrip("0")
    point = len(digit_tuple) + int(exponent)  # digits before the decimal point
    exp = point - 1
    if exp < -4 or exp >= 6:
        fraction = f".{digits[1:]}" if len(digits) > 1 else ""
        return f"{sign}{digits[0]}{fraction}e{'-' if exp < 0 else '+'}{abs(exp):02d}"
    if point <= 0:
        return f"{sign}0.{'0' * -point}{digits}"
    if point >= len(digits):
        return sign + digits + "0" * (point - len(digits))
    return f"{sign}{digits[:point]}.{digits[point:]}"
