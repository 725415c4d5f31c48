"""The layers of components/, read from the source: no import from a lower layer to a higher one, and no import
circle between modules. Module-level and function-level imports count alike (a lazy import is a dependency all
the same), and so do imports under `if TYPE_CHECKING:`: no layer needs one that climbs.

The map is LAYERS below; docs/architecture.md carries the same table (the last test checks they agree).
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COMPONENTS = ROOT / "components"

LAYERS: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("foundation", ("errors", "input_files", "project", "results", "vocabulary"),
     "problems, bounded file reads, the project folder, what every check reports, every label/taint/annotation/tag "
     "name"),
    ("spec", ("spec",), "the stack file, parsed and validated"),
    ("catalog", ("catalog",), "sourced facts: sizes, limits, versions, images, provider behaviour"),
    ("planning", ("planning",), "pure planners: every decision, in frozen plan objects"),
    ("rendered", ("bootstrap", "bake", "azure", "kubernetes"),
     "boot text, image bundles, Azure resources, in-cluster objects: render plan data"),
    ("checks", ("simulation", "preflight", "cluster"),
     "the bring-up simulated over the rendered objects, the ARM preflight, the top-level component"),
    ("runs", ("offline", "report", "diff"), "the program run under mocks, its outputs and report, plan comparison"),
    ("commands", ("cli", "verify"), "what a user runs"),
)
"""Bottom to top: (layer, units under components/, what it holds). A unit imports from its own layer and below."""


def layer_of(unit: str) -> int:
    return next(i for i, (_, units, _) in enumerate(LAYERS) if unit in units)


def module_name(path: Path, root: Path) -> str:
    """The import name: components/ is the package `gpucluster`; tests/ is `tests`."""
    parts = path.relative_to(root).with_suffix("").parts
    parts = ("gpucluster", *parts[1:]) if parts[0] == "components" else parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            inside |= {id(n) for statement in node.body for n in ast.walk(statement)}
    return inside


def imports(source: str, module: str, is_package: bool, known: set[str]) -> list[tuple[str, int, bool]]:
    """(imported module, line, under TYPE_CHECKING) for every `gpucluster` import in the source, anywhere in it.
    `from package import name` counts as an import of the submodule when `name` is one."""
    tree = ast.parse(source)
    typing_only = _type_checking_nodes(tree)
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Import | ast.ImportFrom):
            continue
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        else:
            base = node.module or ""
            if node.level:
                package = module.split(".") if is_package else module.split(".")[:-1]
                package = package[:len(package) - node.level + 1]
                base = ".".join([*package, *([base] if base else [])])
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        # gpucluster.policies is the pack (policies/) and gpucluster.agents the node agents (agents/): programs of their
        # own, outside the layers (the pack as it was when imported as `policies`; the agents import none of ours)
        found += [(t, node.lineno, id(node) in typing_only) for t in targets
                  if t.split(".")[0] == "gpucluster" and t.split(".")[1:2] not in (["policies"], ["agents"])]
    return found


def graph(root: Path) -> dict[str, list[tuple[str, int, bool]]]:
    files = {module_name(f, root): f for f in (root / "components").rglob("*.py")}
    known = set(files)
    return {m: imports(f.read_text(), m, f.name == "__init__.py", known) for m, f in sorted(files.items())}


def unit(module: str) -> str:
    return module.split(".")[1] if "." in module else ""


def climbs(edges: dict[str, list[tuple[str, int, bool]]]) -> list[str]:
    return sorted({f"{m}:{line} imports {t} ({LAYERS[layer_of(unit(m))][0]} -> {LAYERS[layer_of(unit(t))][0]})"
                   + (" under TYPE_CHECKING" if typing_only else "")
                   for m, targets in edges.items() if unit(m) for t, line, typing_only in targets
                   if unit(t) and layer_of(unit(t)) > layer_of(unit(m))})


def circles(edges: dict[str, list[tuple[str, int, bool]]]) -> list[list[str]]:
    """Strongly connected components of more than one module, or a module importing itself (Tarjan)."""
    succ = {m: sorted({t for t, _, _ in targets if t in edges}) for m, targets in edges.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in succ[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1 or v in succ[v]:
                found.append(sorted(component))

    for m in succ:
        if m not in index:
            visit(m)
    return found


def test_every_unit_of_components_has_a_layer() -> None:
    units = {p.stem if p.is_file() else p.name for p in COMPONENTS.iterdir()
             if (p.suffix == ".py" and p.name != "__init__.py")
             or (p.is_dir() and not p.is_symlink() and any(p.glob("*.py")))}
    placed = {u for _, members, _ in LAYERS for u in members}
    assert units == placed


def test_no_import_climbs_a_layer() -> None:
    found = climbs(graph(ROOT))
    assert not found, "\n".join(found)


def test_no_import_circle() -> None:
    found = circles(graph(ROOT))
    assert not found, "\n".join(" <-> ".join(c) for c in found)


def test_the_boot_text_imports_only_plan_types_from_the_planners() -> None:
    """components/bootstrap/ renders plan data: what it takes from components/planning/ are the plan's types
    (frozen dataclasses), never a planner's function or constant."""
    for path in (COMPONENTS / "bootstrap").rglob("*.py"):
        module = module_name(path, ROOT)
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("gpucluster.planning"):
                imported = importlib.import_module(node.module or "")
                for alias in node.names:
                    assert isinstance(getattr(imported, alias.name), type), f"{module} imports {node.module}.{alias.name}"


def test_the_checks_catch_a_climb_and_a_circle(tmp_path: Path) -> None:
    """The same functions over a made-up tree: a planner reaching the in-cluster objects lazily, and two modules
    importing each other (one of them under TYPE_CHECKING)."""
    files = {
        "components/planning/plan.py": "def plan():\n    from gpucluster.kubernetes.objects import layer\n",
        "components/kubernetes/objects/layer.py": "from gpucluster.planning import plan\n",
        "components/kubernetes/objects/__init__.py": "",
        "components/spec/a.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from gpucluster.spec.b import B\n",
        "components/spec/b.py": "from gpucluster.spec import a\n",
    }
    for path, text in files.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text)
    edges = graph(tmp_path)
    assert climbs(edges) == ["gpucluster.planning.plan:2 imports gpucluster.kubernetes.objects.layer "
                             "(planning -> rendered)"]
    assert sorted(map(tuple, circles(edges))) == [
        ("gpucluster.kubernetes.objects.layer", "gpucluster.planning.plan"), ("gpucluster.spec.a", "gpucluster.spec.b")]


def test_the_architecture_page_shows_this_map() -> None:
    page = (ROOT / "docs" / "architecture.md").read_text()
    rows = [f"| {i} | {name} | {', '.join(f'`{u}`' for u in units)} | {why} |"
            for i, (name, units, why) in reversed(list(enumerate(LAYERS)))]
    assert "\n".join(rows) in page, "docs/architecture.md's layer table differs from tests/test_layers.py LAYERS"


def private_test_imports(source: str, module: str) -> list[str]:
    """Underscore names `module` (a module under tests/) imports from another module under tests/: what two files
    share is public, in tests/support/ (tests/README.md)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("tests.") and node.module != module:
            found += [f"{module}:{node.lineno} imports {node.module}.{a.name}" for a in node.names
                      if a.name.startswith("_")]
    return found


def test_no_test_module_imports_another_ones_private_names() -> None:
    tests = ROOT / "tests"
    found = [line for f in sorted(tests.rglob("*.py"))
             for line in private_test_imports(f.read_text(), module_name(f, ROOT))]
    assert found == []
    assert private_test_imports("from tests.test_a import _helper, shared\n", "tests.test_b") == [
        "tests.test_b:1 imports tests.test_a._helper"]


def outside_support_imports(source: str, module: str) -> list[str]:
    """What `module` (a module under tests/) imports from tests/ outside tests/support/: a test file, or conftest.py
    (its fixtures are found by name, never imported)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Import | ast.ImportFrom):
            continue
        names = ([f"(relative) {node.module or '.'}"] if isinstance(node, ast.ImportFrom) and node.level else
                 [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names])
        found += [f"{module}:{node.lineno} imports {name}" for name in names
                  if (name.startswith("tests.") or name == "tests" or name.startswith("(relative)"))
                  and not name.startswith("tests.support.")]
    return found


def test_tests_import_helpers_only_from_the_support_package() -> None:
    tests = ROOT / "tests"
    found = [line for f in sorted(tests.rglob("*.py"))
             for line in outside_support_imports(f.read_text(), module_name(f, ROOT))]
    assert found == [], "move what tests share into tests/support/:\n" + "\n".join(found)
    assert outside_support_imports("from tests.test_cli import gpucluster\nimport tests.conftest\n"
                                   "from tests.support.cli import gpucluster\nfrom . import x\n", "tests.test_b") == [
        "tests.test_b:1 imports tests.test_cli", "tests.test_b:2 imports tests.conftest",
        "tests.test_b:4 imports (relative) ."]
