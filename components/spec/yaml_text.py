"""Read a stack file's YAML with bounded work: a size cap, UTF-8 only, libyaml's parser, duplicate keys refused,
and a cap on nesting and on the nodes aliases can expand to (a "billion laughs" document stays small on disk
and in the loader, but explodes in whatever walks it next).

YAML requires the keys of a mapping to be unique (YAML 1.2 spec, 3.2.1.1 "Nodes"), and Go's gopkg.in/yaml.v3
decoder refuses duplicates ("mapping key ... already defined", decode.go) and excessive aliasing; PyYAML silently
keeps the last value. We refuse all of it before any planning starts.
"""

from __future__ import annotations

from typing import Any

import yaml

from components.errors import SpecError

MAX_BYTES = 1 << 20
"""A stack file is a few kilobytes (prod's is under 3 KB); a megabyte is far beyond any real one."""
MAX_DEPTH = 64
MAX_NODES = 200_000
"""Values after alias expansion: prod has under 500."""

_Loader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _StrictLoader(_Loader):  # type: ignore[valid-type,misc]
    """libyaml's parser with a constructor that refuses duplicate mapping keys (PyYAML keeps the last)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, yaml.Node] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)  # type: ignore[arg-type]
            if isinstance(key, list | dict):
                raise yaml.constructor.ConstructorError(None, None, "a mapping key must be a scalar",
                                                        key_node.start_mark)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r} (first at line {seen[key].start_mark.line + 1}); "
                                "keep one", key_node.start_mark)
            seen[key] = key_node
        return super().construct_mapping(node, deep=deep)


def _decode(data: bytes, where: str) -> str:
    if len(data) > MAX_BYTES:
        raise SpecError.at(where, f"is {len(data):,} bytes; a stack file is at most {MAX_BYTES:,} bytes")
    if data[:2] in (b"\xff\xfe", b"\xfe\xff"):
        raise SpecError.at(where, "is UTF-16 text; save it as UTF-8, as `pulumi config set` writes it")
    if b"\x00" in data:
        raise SpecError.at(where, "is binary (holds NUL bytes); give the YAML stack file")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise SpecError.at(where, f"is not UTF-8 text (byte {error.start}); save it as UTF-8") from None


def _check_size(value: Any, where: str) -> None:
    """Walk the loaded value with a budget, so shared (aliased) subtrees cannot make the work unbounded."""
    budget = MAX_NODES
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        budget -= 1
        if budget < 0:
            raise SpecError.at(where, f"expands to more than {MAX_NODES:,} values (aliases?); write it out plainly")
        if depth > MAX_DEPTH:
            raise SpecError.at(where, f"is nested more than {MAX_DEPTH} levels deep")
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)


def _check_depth(text: str, where: str) -> None:
    """libyaml's parser is a state machine, but composing nodes recurses in C: a few hundred thousand
    nested brackets crash the process (seen: SIGSEGV at 200,000). So count nesting on the events first."""
    depth = 0
    for event in yaml.parse(text, Loader=_Loader):
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                raise SpecError.at(where, f"is nested more than {MAX_DEPTH} levels deep")
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1


def load_yaml(data: bytes, where: str) -> Any:
    """The document in `data`, or a SpecError naming `where` with one readable line."""
    text = _decode(data, where)
    try:
        _check_depth(text, where)
        document = yaml.load(text, Loader=_StrictLoader)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(error, "problem", None) or "cannot be parsed"
        raise SpecError.at(where, f"invalid YAML{at}: {problem}") from None
    except RecursionError:
        raise SpecError.at(where, f"is nested more than {MAX_DEPTH} levels deep") from None
    _check_size(document, where)
    return document
