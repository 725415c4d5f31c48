"""Generated facts have one home: components/catalog/facts/ (package data of gpucluster.catalog). Every file there is
JSON naming, in its `generator` key, the tool in tools/ that writes it, and that tool names the file; no JSON file
elsewhere is generated: none carries a `generator` key or an upstream `commit`, and no tool names one as its output,
but for the two listed below with their reasons."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import tomllib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
HOME = ROOT / "components" / "catalog" / "facts"
OUTSIDE_THE_HOME = {
    "policies/rules/vm_prices.json": ("tools/refresh_prices.py", "the policy pack's copy of the VM rates in "
                                      "facts/prices.json: the pack runs without components/"),
    "tests/golden/stacks.json": ("tools/golden.py", "the shipped stacks' plan figures, an output checked against the "
                                 "plan, not facts read upstream"),
}
"""Files a tool writes that are not facts read from upstream sources, each with its tool and why it lives where it
does."""
SAVED_ANSWERS = ("components/catalog/data/price_answers/",)
"""Server answers saved as they came: inputs the tools read (answers.json lists them), not facts they write."""


def _home_files() -> list[Path]:
    return sorted(p for p in HOME.rglob("*") if p.is_file())


def _json_files_elsewhere() -> list[str]:
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "*.json"], cwd=ROOT,
                            capture_output=True, text=True, check=True).stdout.split()
    home = HOME.relative_to(ROOT).as_posix() + "/"
    return sorted(name for name in set(listed) if not name.startswith(home) and (ROOT / name).is_file())


def _names_a_tool_writes(tool: Path) -> tuple[set[str], list[re.Pattern[str]]]:
    """The tool's string literals, and its f-strings that build a JSON file's name (`f"flags-{name}.json"`) as
    patterns."""
    literals: set[str] = set()
    patterns: list[re.Pattern[str]] = []
    for node in ast.walk(ast.parse(tool.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            literals.add(node.value)
        elif isinstance(node, ast.JoinedStr) and len(node.values) > 1:
            head, tail = node.values[0], node.values[-1]
            if isinstance(head, ast.Constant) and isinstance(tail, ast.Constant) and str(tail.value).endswith(".json"):
                patterns.append(re.compile("".join(re.escape(str(v.value)) if isinstance(v, ast.Constant) else "[^/]+"
                                                   for v in node.values)))
    return literals, patterns


def _mentions(literals: set[str], name: str) -> bool:
    return any(re.search(rf"(?<![\w.-]){re.escape(name)}(?![\w-])", text) for text in literals)


def _tools() -> dict[str, tuple[set[str], list[re.Pattern[str]]]]:
    return {p.relative_to(ROOT).as_posix(): _names_a_tool_writes(p) for p in sorted((ROOT / "tools").rglob("*.py"))}


def _load(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, RecursionError):  # the hostile inputs under tests/data/ are meant not to parse
        return None


def test_every_file_in_the_home_is_json_naming_a_tool_that_names_it() -> None:
    files = _home_files()
    assert len(files) >= 29
    for path in files:
        where = path.relative_to(ROOT)
        assert path.suffix == ".json", f"{where}: the home holds JSON only"
        document = json.loads(path.read_text(encoding="utf-8"))
        assert isinstance(document, dict) and isinstance(document.get("generator"), str), \
            f"{where}: no top-level `generator` naming the tool that writes it"
        generator = document["generator"]
        assert generator.startswith("tools/") and (ROOT / generator).is_file(), \
            f"{where}: its generator {generator} is not a tool in tools/"
        literals, patterns = _names_a_tool_writes(ROOT / generator)
        assert _mentions(literals, path.name) or any(p.fullmatch(path.name) for p in patterns), \
            f"{where}: {generator} does not name {path.name} (renamed, or written by another tool?)"


def test_the_wheel_ships_every_file_in_the_home() -> None:
    globs = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    catalog = ROOT / "components" / "catalog"
    shipped = {path for pattern in globs["gpucluster.catalog"] for path in catalog.glob(pattern)}
    assert [str(p.relative_to(ROOT)) for p in _home_files() if p not in shipped] == [], \
        "pyproject.toml [tool.setuptools.package-data] gpucluster.catalog leaves these out of the wheel"


def test_no_json_file_elsewhere_is_generated() -> None:
    tools = _tools()
    elsewhere = _json_files_elsewhere()
    assert any(name.startswith("tests/data/") for name in elsewhere)
    for name in elsewhere:
        document = _load(ROOT / name)
        if isinstance(document, dict):
            assert "generator" not in document, f"{name} names a generator: move it to {HOME.relative_to(ROOT)}/"
            assert "commit" not in document, f"{name} records an upstream commit, as extracted facts do: move it " \
                                             f"to {HOME.relative_to(ROOT)}/ with the tool that extracts it"
        if name in OUTSIDE_THE_HOME or name.startswith(SAVED_ANSWERS):
            continue
        path = Path(name)
        writers = [tool for tool, (literals, _) in tools.items() if _mentions(literals, name)
                   or any(text.endswith(f"/{path.name}") or text == path.name for text in literals)]
        assert writers == [], f"{name} is named by {', '.join(writers)}: a tool's output belongs in " \
                              f"{HOME.relative_to(ROOT)}/"


def test_the_files_outside_the_home_are_their_tools_outputs() -> None:
    tools = _tools()
    for name, (tool, _why) in OUTSIDE_THE_HOME.items():
        assert (ROOT / name).is_file(), f"{name} is gone: drop it from OUTSIDE_THE_HOME"
        assert _mentions(tools[tool][0], Path(name).name), f"{tool} no longer writes {name}"
