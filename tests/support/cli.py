"""`gpucluster` run as a user runs it, in a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.support.stacks import ROOT


def gpucluster(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "components.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)
