"""Extract the keys an ACR Tasks YAML file may use from Azure/acr-builder's source: the `yaml:"..."` tags of the
`Task` struct (graph/task.go) and the `Step` struct (graph/step.go), with the commit they were read at.

    python -m tools.acr_task_keys <acr-builder git dir> [commit]   # writes components/catalog/facts/acr_task_keys.json

The git dir is a clone or a bare mirror (`git show <commit>:<path>` is all it needs)."""

from __future__ import annotations

import re
import subprocess
import sys

from tools.facts_home import FACTS, generator_of, write_facts

OUT = FACTS / "acr_task_keys.json"
TAG = re.compile(r'yaml:"([A-Za-z]+)[,"]')


def struct_keys(source: str, struct: str) -> list[str]:
    """The yaml tag names of one Go struct's fields."""
    match = re.search(rf"^type {struct} struct \{{\n(.*?)^\}}", source, re.S | re.M)
    if match is None:
        raise ValueError(f"no `type {struct} struct` in the source")
    return sorted(set(TAG.findall(match.group(1))))


def extract(git_dir: str, commit: str = "HEAD") -> dict[str, object]:
    def show(path: str) -> str:
        return subprocess.run(["git", "-C", git_dir, "show", f"{commit}:{path}"], check=True, capture_output=True,
                              text=True).stdout

    sha = subprocess.run(["git", "-C", git_dir, "rev-parse", commit], check=True, capture_output=True,
                         text=True).stdout.strip()
    return {"source": "Azure/acr-builder", "commit": sha,
            "task": {"path": "graph/task.go", "keys": struct_keys(show("graph/task.go"), "Task")},
            "step": {"path": "graph/step.go", "keys": struct_keys(show("graph/step.go"), "Step")}}


def main(argv: list[str]) -> int:
    if not 2 <= len(argv) <= 3:
        print(__doc__, file=sys.stderr)
        return 2
    write_facts(OUT, generator_of(__file__), extract(*argv[1:]), sort_keys=True)
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
