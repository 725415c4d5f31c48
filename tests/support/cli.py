"""`gpucluster` run as a user runs it, in a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.support.stacks import ROOT


def gpucluster(*args: str, cwd: Path = ROOT, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`gpucluster <args>` in a subprocess, with this environment (`env`: another one instead)."""
    env = {**(os.environ if env is None else env), "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "gpucluster.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)
