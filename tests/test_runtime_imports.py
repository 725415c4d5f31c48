"""The install `make plan` makes (`pip install -e .`: [project.dependencies] only) holds every run-time import.

The dev-only distributions are those the `dev` extra brings in (with everything they require) that the runtime
dependencies do not; their names come from pyproject.toml and the installed packages' metadata (importlib.metadata),
so a package added to either list is covered without editing this test. A fresh interpreter then refuses to import
them (a sys.meta_path finder raising ImportError) and imports every module under components/ and policies/, and
every module named by an import statement anywhere in them or in the Pulumi program, inside functions too: an
import inside a function runs only when that code path does (an SSH key in the stack, say), not when its module is
imported. Imports for the type checker alone (`if TYPE_CHECKING:`) and optional ones (`try: ... except
ImportError`) are left out.
"""

from __future__ import annotations

import importlib.metadata
import json
import subprocess
import sys
import tomllib

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.support.stacks import ROOT


def _closure(requirements: list[str]) -> set[str]:
    """The distributions `requirements` install, with every requirement of theirs (extras and markers honoured)."""
    found: set[tuple[str, frozenset[str]]] = set()
    pending = [Requirement(text) for text in requirements]
    while pending:
        requirement = pending.pop()
        name = canonicalize_name(requirement.name)
        key = (name, frozenset(requirement.extras))
        if key in found or (requirement.marker is not None and not requirement.marker.evaluate({"extra": ""})):
            continue
        found.add(key)
        try:
            requires = importlib.metadata.distribution(name).requires or []
        except importlib.metadata.PackageNotFoundError:
            continue
        for text in requires:
            nested = Requirement(text)
            environments = [{"extra": extra} for extra in requirement.extras] or [{"extra": ""}]
            if nested.marker is None or any(nested.marker.evaluate(env) for env in environments):
                pending.append(Requirement(str(nested).split(";")[0]))
    return {name for name, _ in found}


def dev_only_modules() -> list[str]:
    """Top-level module names that only dev-only distributions provide."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    runtime = _closure(project["dependencies"])
    dev_only = _closure(project["optional-dependencies"]["dev"]) - runtime
    return sorted(module for module, distributions in importlib.metadata.packages_distributions().items()
                  if all(canonicalize_name(d) in dev_only for d in distributions))


_CHILD = r'''
import ast, importlib, importlib.abc, importlib.util, json, sys
from pathlib import Path

blocked, root = set(json.loads(sys.argv[1])), Path(sys.argv[2])
early = sorted(name for name in sys.modules if name.partition(".")[0] in blocked)


class DevOnly(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in blocked:
            raise ModuleNotFoundError(f"No module named {name!r} (installed only by the dev extra)", name=name)
        return None


sys.meta_path.insert(0, DevOnly())
problems = [f"imported before the check: {name}" for name in early]


def module_name(path):
    """The import name: components/ is the package `gpucluster`, policies/ its `gpucluster.policies`."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    parts[:1] = {"components": ["gpucluster"], "policies": ["gpucluster", "policies"]}.get(parts[0], parts[:1])
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def runtime_imports(tree):
    """Import nodes outside `if TYPE_CHECKING:` and outside a try that catches ImportError."""
    def walk(node):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                yield from walk(ast.Module(body=child.orelse, type_ignores=[]))
                continue
            if isinstance(child, ast.Try) and any(h.type is not None and "ImportError" in ast.unparse(h.type)
                                                  for h in child.handlers):
                continue
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                yield child
            yield from walk(child)
    return walk(tree)


def check(label, action):
    try:
        action()
    except Exception as error:
        problems.append(f"{label}: {type(error).__name__}: {error}")


files = sorted([*root.joinpath("components").rglob("*.py"), *root.joinpath("policies").rglob("*.py"),
                root / "__main__.py"])
for path in files:
    if path.name != "__main__.py":
        check(f"import {module_name(path)}", lambda: importlib.import_module(module_name(path)))
sys.path.append(str(root / "policies"))  # the Pulumi CLI runs the pack as a folder: `from rules import ...`
# The agents image runs the daemons side by side in one folder: `import kube_client` (agents/Dockerfile).
sys.path.append(str(root / "agents"))
for path in files:
    package = module_name(path) if path.name == "__init__.py" else module_name(path).rpartition(".")[0]
    for node in runtime_imports(ast.parse(path.read_text(), str(path))):
        where = f"{path.relative_to(root)}:{node.lineno}"
        if isinstance(node, ast.Import):
            for alias in node.names:
                check(f"{where} import {alias.name}", lambda: importlib.import_module(alias.name))
            continue
        base = importlib.util.resolve_name("." * node.level + (node.module or ""), package) if node.level \
            else node.module
        def imported(base=base, names=[a.name for a in node.names]):
            module = importlib.import_module(base)
            for name in names:
                if name != "*" and not hasattr(module, name):
                    importlib.import_module(f"{base}.{name}")
        check(f"{where} from {base} import ...", imported)
print(json.dumps(problems))
'''


def test_dev_only_distributions_are_found() -> None:
    blocked = dev_only_modules()
    # the dev tools themselves; none of them is a runtime dependency
    assert {"pytest", "hypothesis", "ruff", "kubernetes_validate"} <= set(blocked), blocked
    assert not {"pulumi", "yaml", "pydantic", "jsonschema", "rich"} & set(blocked), blocked


def test_every_runtime_import_is_a_runtime_dependency() -> None:
    result = subprocess.run([sys.executable, "-c", _CHILD, json.dumps(dev_only_modules()), str(ROOT)], cwd=ROOT,
                            env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    problems = json.loads(result.stdout.splitlines()[-1])
    assert problems == [], "\n".join(problems)
