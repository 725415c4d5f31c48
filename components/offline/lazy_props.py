"""pulumi_policy's unknown-checking proxy (pulumi_policy/proxy.py, pulumi-policy 1.21.0), built as rules read it.

`unknown_checking_proxy` copies the whole value up front and gives every object and list its own copy of the
path to it, so memory grows with (objects and lists) x depth: a 5 MB preview of nested lists reached 2.3 GB. These
subclasses of its `_DictProxy` and `_ListProxy` wrap a child only when a rule reads it and link to their parent
instead of copying the path. A rule sees the same types (Mapping and Sequence, the proxy classes), the same values
and the same UnknownValueError with the same property path; the document itself is never copied or changed.
The offline engine's "[unknown]" marker reads as Pulumi's unknown string, as the CLI would hand it over.
"""

from __future__ import annotations

from typing import Any

from pulumi_policy.proxy import UnknownValueError, _DictProxy, _is_unknown, _ListProxy

from gpucluster.catalog.preview_values import UNKNOWN, UNKNOWN_MARK

_NO_PATH: list[str] = []  # the base classes' own path, never read: reads go through __getitem__ below


class _Node:
    _parent: _Node | None
    _key: Any

    def _path(self) -> list[str]:
        keys: list[str] = []
        node: _Node | None = self
        while node is not None and node._parent is not None:
            keys.append(str(node._key))
            node = node._parent
        return keys[::-1]

    def _child(self, key: Any, value: Any, check: bool = True) -> Any:
        if isinstance(value, str) and value == UNKNOWN_MARK:
            value = UNKNOWN
        if check and _is_unknown(value):
            raise UnknownValueError(value, [*self._path(), str(key)])
        if isinstance(value, dict):
            return LazyDict(value, self, key)
        if isinstance(value, list):
            return LazyList(value, self, key)
        return value


class LazyDict(_Node, _DictProxy):
    def __init__(self, target: dict[str, Any], parent: _Node | None = None, key: Any = None) -> None:
        _DictProxy.__init__(self, target, _NO_PATH)
        self._raw = target
        self._parent, self._key = parent, key

    def __getitem__(self, key: Any) -> Any:
        if key == "__target":
            return self._raw
        return self._child(key, self._raw[key])

    def __setitem__(self, key: Any, value: Any) -> None:
        raise TypeError("resource props are read-only to policies")


class LazyList(_Node, _ListProxy):
    def __init__(self, target: list[Any], parent: _Node | None = None, key: Any = None) -> None:
        _ListProxy.__init__(self, target, _NO_PATH)
        self._raw = target
        self._parent, self._key = parent, key

    def __getitem__(self, key: Any) -> Any:
        if key == "__target":
            return self._raw
        if isinstance(key, slice):  # the eager proxy's slice is a list of wrapped items, unknowns left as they are
            return [self._child(index, self._raw[index], check=False) for index in range(*key.indices(len(self._raw)))]
        return self._child(key, self._raw[key])


def lazy_props(inputs: dict[str, Any]) -> LazyDict:
    """A resource's inputs as policies read them: what `unknown_checking_proxy(inputs)` gives, built lazily."""
    return LazyDict(inputs)
