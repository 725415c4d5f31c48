"""Every path of ours that the docs, docstrings and comments name exists: a file that moves takes its mentions along.

A mention is a token that starts with one of the project's top-level folders and ends in a file name. Upstream
sources cite paths too (`docs/cri/config.md` in containerd, `examples/...` in NVIDIA's driver): a mention counts as
ours when its folder exists here below the top (`components/azure/...`), or when it sits directly in a folder only
this project names that way (tools/, tests/, e2e/, bench/, constraints/, stacks/)."""

from __future__ import annotations

import ast
import io
import re
import subprocess
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TOP = ("components", "tools", "tests", "e2e", "bench", "constraints", "stacks", "docs", "examples", "images",
       "policies")
OURS_ALONE = ("tools", "tests", "e2e", "bench", "constraints", "stacks")
MENTION = re.compile(rf"(?<![\w./-])((?:{'|'.join(TOP)})/(?:[\w.-]+/)*[\w-]+\.(?:py|md|json|yaml|sh|txt|toml))"
                     r"(?![\w/])")


def _prose(path: Path) -> str:
    """A document whole; of a Python file, its comments and docstrings (a test's string literals are its data)."""
    text = path.read_text()
    if path.suffix == ".md":
        return text
    parts = [t.string for t in tokenize.generate_tokens(io.StringIO(text).readline) if t.type == tokenize.COMMENT]
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            parts.append(ast.get_docstring(node) or "")
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            parts.append(node.value.value)  # an attribute's docstring
    return "\n".join(parts)


def _ours(mention: str) -> bool:
    parts = mention.split("/")
    return parts[0] in OURS_ALONE or (len(parts) > 2 and (ROOT / parts[0] / parts[1]).is_dir())


def missing_mentions() -> list[str]:
    listed = subprocess.run(["git", "ls-files", "*.py", "*.md"], cwd=ROOT, capture_output=True, text=True,
                            check=True).stdout.split()
    found = []
    for name in listed:
        if name.startswith(("tests/data/", "tests/golden/")):
            continue
        for mention in set(MENTION.findall(_prose(ROOT / name))):
            if _ours(mention) and not (ROOT / mention).exists():
                found.append(f"{name}: {mention}")
    return sorted(found)


def test_every_path_named_in_docs_and_docstrings_exists() -> None:
    assert missing_mentions() == []


def test_a_moved_file_is_caught(tmp_path: Path) -> None:
    assert _ours("components/azure/node_pool.py") and not (ROOT / "components/azure/node_pool.py").exists()
    assert _ours("tools/extract_prometheus_keys.py") and not _ours("docs/cri/config.md")
    mentioned = tmp_path / "m.py"
    mentioned.write_text('"""Built by components/azure/node_pool.py."""\nX = "components/azure/gone.py"  # data\n')
    assert set(MENTION.findall(_prose(mentioned))) == {"components/azure/node_pool.py"}
