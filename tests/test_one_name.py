"""One name per concept, read from the source: a pool's kind is compared as a `PoolKind`, never as its string by hand;
the cluster's prefix mode is read from the pools in one place (components/planning/pod_addresses.py `prefix_mode`,
which `ClusterPlan.prefix_mode` returns); and no string literal stands alone where it documents nothing (an orphaned
docstring, left behind when the line it described moved)."""

from __future__ import annotations

import ast
from pathlib import Path

from gpucluster.spec import PoolKind

ROOT = Path(__file__).resolve().parent.parent
PREFIX_HOME = ROOT / "components" / "planning" / "pod_addresses.py"
"""Where the pod-address modes are named and the only place a pool's mode is compared with them."""
DOCUMENTED = ("components", "tools", "policies", "tests", "bench", "__main__.py")
"""Where orphaned docstrings are looked for."""

_KINDS = frozenset(k.value for k in PoolKind)
_COMPARE_OPS = (ast.Eq, ast.NotEq, ast.In, ast.NotIn)


def _strings(node: ast.expr) -> set[str]:
    """The string constants of an operand: itself, or the items of a tuple/list/set literal."""
    items = node.elts if isinstance(node, ast.Tuple | ast.List | ast.Set) else [node]
    return {i.value for i in items if isinstance(i, ast.Constant) and isinstance(i.value, str)}


def _compares(tree: ast.AST) -> list[ast.Compare]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.Compare) and all(isinstance(op, _COMPARE_OPS) for op in n.ops)]


def kind_by_hand(source: str) -> list[int]:
    """Lines comparing a `.role`/`.kind`/`.kind.value` with a pool kind's string, or any `.kind.value` at all."""
    found = []
    for node in _compares(ast.parse(source)):
        operands = [node.left, *node.comparators]
        texts = [ast.unparse(o) for o in operands]
        names_kind = any(t.endswith((".role", ".kind", ".kind.value")) or t in ("role", "kind") for t in texts)
        if any(t.endswith(".kind.value") for t in texts) or (
                names_kind and any(_strings(o) & _KINDS for o in operands)):
            found.append(node.lineno)
    return found


def prefix_mode_by_hand(source: str) -> list[int]:
    """Lines comparing anything with the `prefixes` mode (its literal or `PREFIXES`)."""
    return sorted(node.lineno for node in _compares(ast.parse(source))
            if any("prefixes" in _strings(o) or ast.unparse(o).endswith("PREFIXES") for o in [node.left, *node.comparators]))


def orphaned_docstrings(source: str) -> list[int]:
    """Lines of string-literal statements that are neither the first statement of a module, class or function nor
    directly after an assignment (an attribute docstring)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        for field in ("body", "orelse", "finalbody"):
            body = getattr(node, field, None)
            if not isinstance(body, list):
                continue
            for i, statement in enumerate(body):
                if not (isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant)
                        and isinstance(statement.value.value, str)):
                    continue
                first = i == 0 and field == "body" and isinstance(
                    node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
                after_assignment = i > 0 and isinstance(body[i - 1], ast.Assign | ast.AnnAssign | ast.AugAssign)
                if not (first or after_assignment):
                    found.append(statement.lineno)
    return found


def _sources(*roots: str) -> dict[str, str]:
    files: list[Path] = []
    for root in roots:
        path = ROOT / root
        files += sorted(path.rglob("*.py")) if path.is_dir() else [path]
    return {str(f.relative_to(ROOT)): f.read_text() for f in files}


def test_pool_kinds_are_compared_as_the_enum() -> None:
    found = [f"{name}:{line}" for name, source in _sources("components").items() for line in kind_by_hand(source)]
    assert found == [], "compare a pool's kind with PoolKind members (`pool.kind is PoolKind.SYSTEM`)"


def test_the_prefix_mode_is_read_in_one_place() -> None:
    home = str(PREFIX_HOME.relative_to(ROOT))
    found = [f"{name}:{line}" for name, source in _sources("components").items() if name != home
             for line in prefix_mode_by_hand(source)]
    assert found == [], "use ClusterPlan.prefix_mode or planning/pod_addresses.py prefix_mode(spec)"


def test_no_orphaned_docstrings() -> None:
    found = [f"{name}:{line}" for name, source in _sources(*DOCUMENTED).items() for line in orphaned_docstrings(source)]
    assert found == [], "a string statement documents nothing here: put it after what it describes or drop it"


def test_the_rules_catch_what_they_name() -> None:
    """Each rule above finds the hand-written form it forbids and lets the intended one through."""
    assert kind_by_hand('a = [p for p in pools if p.role == "system"]') == [1]
    assert kind_by_hand('x = pool.spec.kind.value == "gpu"\ny = kind in ("rack", "gpu")') == [1, 2]
    assert kind_by_hand("a = [p for p in pools if p.kind is PoolKind.SYSTEM]\nb = definition == 'cpu'") == []
    assert prefix_mode_by_hand('m = any(p.pod_addresses == "prefixes" for p in spec.pools)\nn = mode != PREFIXES') \
        == [1, 2]
    assert prefix_mode_by_hand("m = plan.prefix_mode") == []
    orphan = '"""Module."""\nA = 1\n"""Of A."""\n"""Of nothing."""\n\n\ndef f():\n    """Of f."""\n    print()\n    "stray"\n'
    assert orphaned_docstrings(orphan) == [4, 10]


BOOT_IS_THE_CHAIN = ("first_boot", "firstboot", "boot_layer", "bootstep")
"""What the in-cluster layer's bring-up was called before "boot" meant the machines' boot chain only
(docs/architecture.md, "Boot chain"); the outputs keep `firstBoot`, which is camelCase and not matched here."""


def boot_names(source: str, module: str) -> list[str]:
    """Module, function, class, parameter, attribute and variable names that call the bring-up a boot."""
    names = [module.rsplit(".", 1)[-1]]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.append(node.name)
        elif isinstance(node, ast.arg):
            names.append(node.arg)
        elif isinstance(node, ast.Attribute):
            names.append(node.attr)
        elif isinstance(node, ast.Name):
            names.append(node.id)
        elif isinstance(node, ast.alias):
            names += node.name.split(".")
        elif isinstance(node, ast.ImportFrom):
            names += (node.module or "").split(".")
    return sorted({n for n in names if any(old in n.lower() for old in BOOT_IS_THE_CHAIN)})


def test_boot_names_only_the_boot_chain() -> None:
    found = {f"{path.relative_to(ROOT)}: {', '.join(names)}" for path in sorted((ROOT / "components").rglob("*.py"))
             if (names := boot_names(path.read_text(), path.stem))}
    assert found == set()
    assert boot_names("from gpucluster.simulation.boot_layer import first_boot\nplan.first_boot\n", "check") == [
        "boot_layer", "first_boot"]


def components_declared(source: str) -> list[str]:
    """The `pulumi.ComponentResource` subclasses a module declares."""
    return [node.name for node in ast.walk(ast.parse(source)) if isinstance(node, ast.ClassDef)
            and any(ast.unparse(base) in ("pulumi.ComponentResource", "ComponentResource") for base in node.bases)]


def test_each_component_has_a_module_of_its_own() -> None:
    """A component is found by its module's name (kubernetes/add_ons.py held three)."""
    crowded = {f"{path.relative_to(ROOT)}: {', '.join(names)}" for path in sorted((ROOT / "components").rglob("*.py"))
               if len(names := components_declared(path.read_text())) > 1}
    assert crowded == set()
    assert components_declared("class A(pulumi.ComponentResource): ...\nclass B(ComponentResource): ...\n"
                               "class C(Base): ...\n") == ["A", "B"]
