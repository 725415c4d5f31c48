"""Real programs as child processes on loopback: free ports, a log file each, and a stop that never leaves one
behind."""

from __future__ import annotations

import contextlib
import ctypes
import os
import random
import signal
import socket
import subprocess
from dataclasses import dataclass
from pathlib import Path


def _ephemeral_range() -> tuple[int, int]:
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999


def free_ports(count: int) -> list[int]:
    """Ports free now and outside the kernel's ephemeral range: a port bind(0) hands out may be taken by any
    client's outgoing connection before the program that was given it listens."""
    low, high = _ephemeral_range()
    candidates = [p for p in range(10000, 30000) if not low <= p <= high]
    found: list[int] = []
    for port in random.sample(candidates, len(candidates)):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        found.append(port)
        if len(found) == count:
            return found
    raise RuntimeError(f"no {count} free ports below the ephemeral range")


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM when the test process dies, however it dies (prctl PR_SET_PDEATHSIG), so a
    killed run leaves no server behind."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)


@dataclass
class Program:
    name: str
    args: list[str]
    log: Path
    env: dict[str, str] | None = None
    process: subprocess.Popen[bytes] | None = None

    def start(self) -> Program:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with self.log.open("ab") as sink:
            self.process = subprocess.Popen(self.args, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True,
                                            env={**os.environ, **(self.env or {})}, preexec_fn=_die_with_parent)
        return self

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def tail(self, lines: int = 40) -> str:
        if not self.log.exists():
            return ""
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=20)
