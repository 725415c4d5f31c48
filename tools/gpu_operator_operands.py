"""Extract the pod labels and container ports of the GPU operator's operand DaemonSets from its source at the pinned
tag (`assets/state-*/…daemonset.yaml`, which the operator applies with only the namespace, images and node selectors
filled in), into components/catalog/facts/consumers/operands-gpu-operator.json. What scrapes or selects those pods (the metrics
shards' pod discovery) is tested against it.

    python -m tools.gpu_operator_operands --mirrors <folder of git dirs, one per owner+name>
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import yaml

from gpucluster.catalog.versions import GPU_OPERATOR
from tools.consumer_facts.mirrors import commit_of, git, mirror
from tools.facts_home import CONSUMERS, generator_of, write_facts

OUT = CONSUMERS / "operands-gpu-operator.json"
REPO = "NVIDIA/gpu-operator"
ASSETS = ("assets/state-dcgm-exporter/0800_daemonset.yaml", "assets/state-device-plugin/0500_daemonset.yaml",
          "assets/gpu-feature-discovery/0500_daemonset.yaml", "assets/state-container-toolkit/0500_daemonset.yaml",
          "assets/state-operator-validation/0500_daemonset.yaml")


def operand(text: str) -> dict[str, Any]:
    """A DaemonSet asset's name, pod labels and container ports."""
    doc = yaml.safe_load(text)
    pod = doc["spec"]["template"]
    ports = sorted({p["containerPort"] for c in pod["spec"].get("containers", []) for p in c.get("ports", [])})
    return {"name": doc["metadata"]["name"], "podLabels": pod["metadata"].get("labels", {}), "containerPorts": ports}


def extract(mirrors: Path) -> dict[str, Any]:
    repo_dir = mirror(mirrors, REPO)
    tag = f"v{GPU_OPERATOR.version.removeprefix('v')}"
    commit = commit_of(repo_dir, tag)
    operands = {}
    for path in ASSETS:
        found = operand(git(repo_dir, "show", f"{commit}:{path}"))
        operands[found["name"]] = {"file": path, **{k: v for k, v in found.items() if k != "name"}}
    return {"repo": REPO, "tag": tag, "commit": commit, "operands": operands}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mirrors", type=Path, required=True)
    args = parser.parse_args()
    write_facts(OUT, generator_of(__file__), extract(args.mirrors), sort_keys=True)
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
