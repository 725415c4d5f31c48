"""Measure the offline plan: wall time and peak memory per stack, one child process each.

Prints a table; asserts nothing. Run with `make bench`.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STACKS = ("dev", "prod")

CHILD = """
import json, resource, sys, time
from pathlib import Path
start = time.perf_counter()
from components.offline.engine import run_program
from components.planning.cluster_plan import plan_cluster
from components.spec import load_stack_file
stack = load_stack_file(Path(sys.argv[1]), sys.argv[2])
plan = plan_cluster(stack.spec)
run = run_program(Path(sys.argv[3]), "gpucluster", stack.name, stack.config)
print(json.dumps({"seconds": time.perf_counter() - start, "resources": len(run.registrations),
                  "nodes": plan.nodes, "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def measure(stack: str) -> dict[str, float]:
    path = ROOT / "stacks" / f"Pulumi.{stack}.yaml"
    wall = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", CHILD, str(path), stack, str(ROOT / "__main__.py")],
                         cwd=ROOT, capture_output=True, text=True, check=True)
    figures = json.loads(out.stdout.strip().splitlines()[-1])
    figures["process_seconds"] = time.perf_counter() - wall
    return figures


def main() -> None:
    print(f"{'stack':<8}{'nodes':>8}{'resources':>11}{'plan s':>9}{'process s':>11}{'peak MiB':>10}")
    for stack in STACKS:
        f = measure(stack)
        print(f"{stack:<8}{int(f['nodes']):>8,}{int(f['resources']):>11}{f['seconds']:>9.2f}"
              f"{f['process_seconds']:>11.2f}{f['peak_mib']:>10.0f}")


if __name__ == "__main__":
    main()
