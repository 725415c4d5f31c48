"""Facts read from Go source text: flag definitions, struct JSON fields, module versions in go.mod."""

from __future__ import annotations

import re

FLAG_TYPES = ("Bool|String|Int|Int8|Int16|Int32|Int64|Uint|Uint8|Uint16|Uint32|Uint64|Float32|Float64|Duration|IP|"
              "IPMask|IPNet|IPSlice|StringSlice|StringArray|StringToString|StringToInt|StringToInt64|IntSlice|"
              "Int32Slice|Int64Slice|UintSlice|BoolSlice|Float32Slice|Float64Slice|DurationSlice|BytesHex|"
              "BytesBase64|Count|Func|BoolFunc|Text|")
DEFINE = re.compile(r"\.(?:(?:" + FLAG_TYPES + r")(?:Var)?P?|Var|VarP|TextVar)\(\s*"
                    r"(?:[^\"(),]+(?:\([^()]*\))?[^\"(),]*,\s*)?"  # the destination pointer or Value, if any
                    r"(?:\"(?P<name>[A-Za-z0-9][A-Za-z0-9_.-]*)\"|(?P<const>[A-Za-z_][A-Za-z0-9_.]*)\s*,)")
HELPER = re.compile(r"\bmultiStringFlag\(\s*\"(?P<name>[a-z0-9-]+)\"")
"""cluster-autoscaler config/flags/flags.go defines its repeated flags through this helper (flag.Var inside)."""


def go_mod_version(text: str, module: str) -> str:
    """The module's version, a `replace` taking precedence (go.mod reference: replace directives)."""
    replaced = re.search(rf"^\s*(?:replace\s+)?{re.escape(module)}\s+=>\s+{re.escape(module)}\s+(v\S+)", text, re.M)
    if replaced:
        return replaced[1]
    required = re.search(rf"^\s*(?:require\s+)?{re.escape(module)}\s+(v\S+)", text, re.M)
    if not required:
        raise SystemExit(f"{module} not in go.mod")
    return required[1]


def go_flags(text: str) -> set[str]:
    """Flag names a Go file defines; a name given as a constant is resolved in the same file."""
    consts = dict(re.findall(r"\b([A-Za-z_][A-Za-z0-9_]*)\s*(?:string\s*)?=\s*\"([A-Za-z0-9][A-Za-z0-9_.-]*)\"", text))
    code = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("//"))
    names = set()
    for match in DEFINE.finditer(code):
        if match["name"]:
            names.add(match["name"])
        elif match["const"] and match["const"].rsplit(".", 1)[-1] in consts:
            names.add(consts[match["const"].rsplit(".", 1)[-1]])
    names.update(m["name"] for m in HELPER.finditer(code))
    return names


def normalized(name: str) -> str:
    """component-base cli/flag/flags.go WordSepNormalizeFunc: `_` and `-` are the same flag (InitFlags sets it)."""
    return name.replace("_", "-")


STRUCT = re.compile(r"^type (\w+) struct \{\n(.*?)^\}", re.M | re.S)
FIELD = re.compile(r"^\s*(?:(\w+)\s+)?([\w.*\[\]]+(?:\[[\w.*]+\][\w.*]+)?)\s+`json:\"([^\"]*)\"", re.M)


def go_structs(text: str, qualifier: str = "") -> dict[str, dict[str, str]]:
    """Each struct's JSON fields -> Go type; an embedded `json:",inline"` field as `<inline>` -> its type. Types
    are qualified with `qualifier` when they name a struct of the same file."""
    structs: dict[str, dict[str, str]] = {}
    for name, body in STRUCT.findall(text):
        fields: dict[str, str] = {}
        for _field, kind, tag in FIELD.findall(body):
            json_name = tag.split(",")[0]
            if not json_name and "inline" in tag:
                fields[f"<inline>{kind}"] = kind
            elif json_name and json_name != "-":
                fields[json_name] = kind
        structs[f"{qualifier}{name}"] = fields
    local = {n.removeprefix(qualifier) for n in structs}
    if qualifier:  # qualify references to the same file's structs
        for fields in structs.values():
            for key, kind in fields.items():
                bare = kind.lstrip("*[]")
                if bare in local:
                    fields[key] = kind[: len(kind) - len(bare)] + qualifier + bare
    return structs
