"""The shipped stacks and small specs the tests build from, and `gpucluster plan` run as a user runs it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from gpucluster.spec import ClusterSpec, load_stack_file
from gpucluster.spec.loader import named_cluster

ROOT = Path(__file__).resolve().parents[2]
STACKS = ROOT / "stacks"


def stack_spec(name: str) -> ClusterSpec:
    return load_stack_file(STACKS / f"Pulumi.{name}.yaml", name).spec


ALERTS: dict[str, Any] = {"armRoles": ["Owner"]}
"""Where a test stack's alerts go (a stack must say: cluster.metrics.alerts)."""


def small_cluster(**overrides: Any) -> dict[str, Any]:
    """A minimal valid `gpucluster:cluster` value, as YAML would give it."""
    raw: dict[str, Any] = {
        "name": "test",
        "location": "eastus",
        "zones": ["1", "2", "3"],
        "kubernetesVersion": "1.36.4",
        "network": {"addressSpace": ["10.10.0.0/16"]},
        "pools": [
            {"name": "system", "kind": "system", "vmSize": "Standard_D4s_v5", "count": 3},
            {"name": "gpu", "kind": "gpu", "vmSize": "Standard_ND96isr_H100_v5", "count": 150, "podsPerNode": 16},
        ],
        "controlPlane": {"apiServers": {"count": 3}, "etcd": {"members": 3}, "eventsEtcd": None},
        "metrics": {"alerts": ALERTS},
    }
    raw.update(overrides)
    return raw


def spec_of(raw: Any) -> ClusterSpec:
    """A `gpucluster:cluster` value as a spec, its registry named as the loaders name it (from AZURE_SUBSCRIPTION_ID,
    which tests/conftest.py sets)."""
    return named_cluster(raw, {})


def small_spec(**overrides: Any) -> ClusterSpec:
    return spec_of(small_cluster(**overrides))


def plan_stack(stack: str | Path, out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    """`gpucluster plan` as a user runs it, in a subprocess."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "gpucluster.cli", "plan", str(stack), "--quiet", "--out", str(out),
                           *extra], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
