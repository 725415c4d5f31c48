"""Read a stack file's YAML as Pulumi reads it, with bounded work: a size cap, UTF-8 only, libyaml's parser, and
a cap on nesting and on the values aliases and merge keys can expand to (a "billion laughs" document stays small
on disk and in the loader, but explodes in whatever walks it next).

What the text means is decided as gopkg.in/yaml.v3 v3.0.1 decides it, since that is what Pulumi's CLI loads the
file with (components/spec/yaml_go.py): YAML 1.2 core-schema scalars, merge keys, duplicate keys refused
("mapping key ... already defined", decode.go; the YAML 1.2 spec 3.2.1.1 requires unique keys), an anchor that
holds itself refused. PyYAML would read YAML 1.1 scalars and keep the last of two equal keys.
"""

from __future__ import annotations

from typing import Any

import yaml

from gpucluster.errors import SpecError
from gpucluster.spec import yaml_go

MAX_BYTES = 1 << 20
"""A stack file is a few kilobytes (prod's is under 3 KB); a megabyte is far beyond any real one."""
MAX_DEPTH = 64
MAX_NODES = 200_000
"""Values after alias expansion: prod has under 500."""

_Loader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class Composer(_Loader):  # type: ignore[valid-type,misc]
    """libyaml's parser and composer only: every scalar keeps its text and style, and `_Reader` decides what
    it means as gopkg.in/yaml.v3 does."""

    def resolve(self, kind: type[yaml.Node], value: str, implicit: tuple[bool, bool]) -> str:
        # yaml.v3 resolves a plain scalar tagged `!` as an untagged one, and a quoted one as text either way
        return "" if kind is yaml.ScalarNode else super().resolve(kind, value, implicit)


class _Reader:
    """yaml.v3's decoder (decode.go) into `any`, as Pulumi loads a stack file: merge keys (`<<`, the mapping's
    own keys first, then each merged mapping in order), duplicate keys refused, an anchor holding itself
    refused, and a budget on values read, aliases expanded included."""

    def __init__(self) -> None:
        self.budget = MAX_NODES
        self.expanding: set[int] = set()

    def value(self, node: yaml.Node, depth: int = 0) -> Any:
        self._count(node, depth)
        if isinstance(node, yaml.ScalarNode):
            try:
                tag, value = scalar(node)
                return yaml_go.program_value(tag, value)
            except yaml_go.GoYamlError as error:
                raise _ReadError(str(error), node) from None
        if id(node) in self.expanding:
            raise _ReadError("anchor value contains itself", node)
        self.expanding.add(id(node))
        try:
            if isinstance(node, yaml.SequenceNode):
                return [self.value(item, depth + 1) for item in node.value]
            out: dict[str, Any] = {}
            if isinstance(node, yaml.MappingNode):
                self._fill(node, out, None, depth)
            return out
        finally:
            self.expanding.discard(id(node))

    def _count(self, node: yaml.Node, depth: int) -> None:
        self.budget -= 1
        if self.budget < 0:
            raise _ReadError(f"expands to more than {MAX_NODES:,} values (aliases?); write it out plainly", node)
        if depth > MAX_DEPTH:
            raise _ReadError(f"is nested more than {MAX_DEPTH} levels deep", node)

    @staticmethod
    def _is_merge(key: yaml.Node) -> bool:
        return (isinstance(key, yaml.ScalarNode) and key.value == "<<" and key.style in (None, "")
                and yaml_go.short_tag(key.tag) in ("", "!", yaml_go.MERGE))

    def _fill(self, node: yaml.MappingNode, out: dict[str, Any], merged: set[tuple[str, Any]] | None,
              depth: int) -> None:
        """decode.go mapping() and merge(): `merged` holds the keys already set when this mapping is merged
        into another one; those keep their value."""
        seen: dict[tuple[type, str], yaml.Node] = {}
        for key, _ in node.value:
            if isinstance(key, yaml.ScalarNode):
                if (type(key), key.value) in seen:
                    first = seen[(type(key), key.value)].start_mark.line + 1
                    raise _ReadError(f"duplicate key {key.value!r} (first at line {first}); keep one", key)
                seen[(type(key), key.value)] = key
        merge_node: yaml.Node | None = None
        own: list[tuple[tuple[str, Any], str]] = []
        for key, item in node.value:
            if self._is_merge(key):
                merge_node = item
                continue
            self._count(key, depth + 1)
            if not isinstance(key, yaml.ScalarNode):
                raise _ReadError("a mapping key must be a scalar (text or a number), not a list or mapping", key)
            try:
                tag, raw = scalar(key)
            except yaml_go.GoYamlError as error:
                raise _ReadError(str(error), key) from None
            identity = (tag, raw)
            if merged is not None:
                if identity in merged:
                    continue
                merged.add(identity)
            name = yaml_go.key_text(tag, raw)
            if name in out:
                raise _ReadError(f"keys {name!r} collide (Pulumi reads every key as text); keep one", key)
            out[name] = self.value(item, depth + 1)
            own.append((identity, name))
        if merge_node is None:
            return
        if merged is None:
            merged = {identity for identity, _ in own}
        sources = merge_node.value if isinstance(merge_node, yaml.SequenceNode) else [merge_node]
        for source in sources:
            if not isinstance(source, yaml.MappingNode):
                raise _ReadError("map merge requires map or sequence of maps as the value", source)
            self._count(source, depth + 1)
            if id(source) in self.expanding:
                raise _ReadError("anchor value contains itself", source)
            self.expanding.add(id(source))
            try:
                self._fill(source, out, merged, depth + 1)
            finally:
                self.expanding.discard(id(source))


def scalar(node: yaml.ScalarNode) -> tuple[str, Any]:
    """A scalar node as yaml.v3's decoder reads it into `any` (decode.go scalar()): (resolved tag, Go value)."""
    if node.style not in (None, "") and node.tag in ("", "!"):
        return yaml_go.STR, node.value  # quoted or block scalar, untagged: text (Node.indicatedString)
    tag, value = yaml_go.resolve(node.tag, node.value)
    return (yaml_go.STR, yaml_go.binary_text(value)) if tag == yaml_go.BINARY else (tag, value)


class _ReadError(Exception):
    def __init__(self, message: str, node: yaml.Node) -> None:
        super().__init__(message)
        self.message, self.mark = message, node.start_mark


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
    """The document in `data` as Pulumi reads it, or a SpecError naming `where` with one readable line."""
    text = _decode(data, where)
    try:
        _check_depth(text, where)
        root = yaml.compose(text, Loader=Composer)
        document = None if root is None else _Reader().value(root)
    except (yaml.YAMLError, _ReadError, yaml_go.GoYamlError) as error:
        mark = getattr(error, "problem_mark", None) or getattr(error, "mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(error, "problem", None) or getattr(error, "message", None) or str(error) or "cannot be parsed"
        raise SpecError.at(where, f"invalid YAML{at}: {problem}") from None
    except RecursionError:
        raise SpecError.at(where, f"is nested more than {MAX_DEPTH} levels deep") from None
    return document


def check_size(value: Any, where: str) -> None:
    """The budget and nesting bound on a value read another way (a config value given as JSON text)."""
    _check_size(value, where)
