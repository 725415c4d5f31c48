"""Stack names as Pulumi takes them, minus the names that are paths.

Pulumi's rule (pulumi/pulumi pkg/backend/httpstate/backend.go and pkg/backend/diy/backend.go, validateStackName):
`^[A-Za-z0-9_.-]{1,100}$`. A name is also a file name here (stacks/Pulumi.<name>.yaml, policies/config/<name>.json,
out/<name>), so `.` and `..`, and any name of dots only, are refused too: they name folders, not stacks.
"""

from __future__ import annotations

import re

from gpucluster.errors import SpecError

STACK_NAME = re.compile(r"[A-Za-z0-9_.-]{1,100}")


def stack_name_problem(name: str) -> str | None:
    """Why `name` is not a stack name, or None when it is one."""
    if not STACK_NAME.fullmatch(name):
        return ("is not a stack name: 1-100 letters, digits, `_`, `.` or `-`, as Pulumi allows "
                "(no `/`, spaces or other characters)")
    if not name.strip("."):
        return "is not a stack name: `.`, `..` and names of dots only are folders; give the stack's name"
    return None


def check_stack_name(name: str, where: str) -> str:
    problem = stack_name_problem(name)
    if problem is not None:
        shown = repr(name[:60] + ("..." if len(name) > 60 else ""))  # escaped, one line
        raise SpecError.at(where, f"{shown} {problem}")
    return name
