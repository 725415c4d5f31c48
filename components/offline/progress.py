"""Progress output of `gpucluster plan` on stderr."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from rich.console import Console


class Progress:
    """Stage lines on stderr with their times; a live resource count while the program runs on a terminal.
    Silent in --quiet and --json modes, so CI logs and machine output stay clean."""

    def __init__(self, errors: Console, enabled: bool) -> None:
        self.errors, self.enabled = errors, enabled
        self.started = time.perf_counter()
        self.status: Any = None

    def stage(self, text: str) -> None:
        if self.enabled:
            self.errors.print(f"[{time.perf_counter() - self.started:5.1f}s] {text}", markup=False, highlight=False)

    def counting(self, total_hint: str) -> Callable[[int], None] | None:
        if not (self.enabled and self.errors.is_terminal):
            return None
        self.status = self.errors.status(f"registering resources ({total_hint})")
        self.status.start()

        def tick(count: int) -> None:
            if count % 10 == 0:
                self.status.update(f"registered {count} resources ({total_hint})")
        return tick

    def done_counting(self) -> None:
        if self.status is not None:
            self.status.stop()
            self.status = None
