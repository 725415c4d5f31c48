"""Every Pulumi component under components/ has one surface: `Component(name, args: ComponentArgs, opts=None)`,
with `ComponentArgs` a frozen dataclass whose every field says what it is in a docstring; the component declares
what it publishes as annotated attributes and registers outputs. Azure components take where they go as one
AzureScope (docs/architecture.md, "The component surface"). Read from the source, so a new component is held to
it the day it is written."""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import textwrap
from pathlib import Path

import pulumi

ROOT = Path(__file__).resolve().parent.parent
COMPONENTS = ROOT / "components"



def components() -> list[type]:
    found = []
    for path in sorted(COMPONENTS.rglob("*.py")):
        source = path.read_text()
        if "pulumi.ComponentResource)" not in source:
            continue
        parts = ("gpucluster", *path.relative_to(COMPONENTS).with_suffix("").parts)
        module = importlib.import_module(".".join(parts))
        found += [c for _, c in inspect.getmembers(module, inspect.isclass)
                  if issubclass(c, pulumi.ComponentResource) and c.__module__ == module.__name__]
    return found


def undocumented_fields(cls: type) -> list[str]:
    """Fields of a dataclass whose annotation is not followed by a docstring, read from its class body."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    body = next(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)).body
    missing = []
    for statement, following in zip(body, [*body[1:], None], strict=True):
        if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name):
            documented = isinstance(following, ast.Expr) and isinstance(following.value, ast.Constant) \
                and isinstance(following.value.value, str)
            if not documented:
                missing.append(statement.target.id)
    return missing


def surface_problems(cls: type) -> list[str]:
    name = cls.__name__
    problems = []
    params = list(inspect.signature(cls.__init__).parameters.values())
    if [p.name for p in params] != ["self", "name", "args", "opts"] or params[3].default is not None:
        problems.append(f"{name}.__init__ is not (self, name, args, opts=None)")
    module = importlib.import_module(cls.__module__)
    args = getattr(module, f"{name}Args", None)
    if not (isinstance(args, type) and dataclasses.is_dataclass(args) and args.__dataclass_params__.frozen):  # type: ignore[attr-defined]
        return [*problems, f"{name}Args is not a frozen dataclass in {cls.__module__}"]
    problems += [f"{name}Args.{f} has no docstring" for f in undocumented_fields(args)]
    if "scope" in {f.name for f in dataclasses.fields(args)} and \
            next(f for f in dataclasses.fields(args) if f.name == "scope").type != "AzureScope":
        problems.append(f"{name}Args.scope is not an AzureScope")
    published = [k for k in inspect.get_annotations(cls) if not k.startswith("_")]
    if not published:
        problems.append(f"{name} declares no published attribute")
    problems += [f"{name}.{k} has no docstring" for k in undocumented_fields(cls) if not k.startswith("_")]
    if not registers_outputs(inspect.getsource(cls)):
        problems.append(f"{name} never calls register_outputs with an output")
    return problems


def registers_outputs(source: str) -> bool:
    """A `self.register_outputs(...)` call whose argument is not an empty mapping (`{}` registers nothing)."""
    calls = [n for n in ast.walk(ast.parse(textwrap.dedent(source))) if isinstance(n, ast.Call)
             and isinstance(n.func, ast.Attribute) and n.func.attr == "register_outputs"]
    return any(c.args and not (isinstance(c.args[0], ast.Dict) and not c.args[0].keys) for c in calls)


def test_the_outputs_rule_fails_on_an_empty_registration() -> None:
    assert not registers_outputs("class C:\n    def __init__(self):\n        self.register_outputs({})\n")
    assert not registers_outputs("class C:\n    pass\n")
    assert registers_outputs("class C:\n    def __init__(self):\n        self.register_outputs({'a': 1})\n")


def test_every_component_takes_one_args_value_and_publishes_its_outputs() -> None:
    found = components()
    assert len(found) >= 20
    assert [p for c in found for p in surface_problems(c)] == []


def test_azure_components_take_their_place_as_one_scope() -> None:
    """Where an Azure component's resources go is one AzureScope, never a resource group, region or tags of its own."""
    loose = {"resource_group_name", "location", "tags", "subscription_id", "cluster"}
    for cls in components():
        if cls.__module__.startswith("gpucluster.azure.") and cls.__name__ not in ("Network", "ClusterPki",
                                                                                     "BootstrapTokens"):
            fields = {f.name for f in dataclasses.fields(importlib.import_module(cls.__module__).__dict__[
                f"{cls.__name__}Args"])}
            assert "scope" in fields and not fields & loose, cls.__name__


def test_the_checks_catch_what_they_name() -> None:
    class Loose(pulumi.ComponentResource):
        def __init__(self, name: str, plan: object, opts: pulumi.ResourceOptions | None = None) -> None:
            super().__init__("t:t:Loose", name, None, opts)

    assert surface_problems(Loose)[:2] == ["Loose.__init__ is not (self, name, args, opts=None)",
                                           f"LooseArgs is not a frozen dataclass in {__name__}"]

    @dataclasses.dataclass(frozen=True)
    class Half:
        documented: int
        """It is."""
        bare: int

    assert undocumented_fields(Half) == ["bare"]
