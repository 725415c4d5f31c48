"""How often `gpucluster plan` runs Python's cyclic garbage collector.

With the default thresholds (700, 10, 10) a plan spent about a third of its CPU time in full (generation 2)
collections, each walking every tracked object, most of them the SDKs' modules' (the pulumi-azure-native and
pulumi-kubernetes modules a plan imports hold about 310,000): prod measured 11 full collections, 1.9 s of its 6.2 s
(docs/performance.md). A plan is one short process whose memory is the program's objects, alive to the end:
collecting rarely does not raise its peak (prod 249 -> 250 MiB, prod x2 256 -> 259 MiB), and the outputs are the
same bytes. Only `plan` raises them; `check` and `diff` read previews anyone can shape and keep the defaults
(docs/operations.md, "Input bounds").
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

PLAN_THRESHOLDS = (50_000, 20, 20)
"""gc.set_threshold's (generation 0 allocations, generation-0 runs per generation 1, generation-1 runs per
generation 2) while a plan runs; chosen by measurement on prod (docs/performance.md): (10,000, 10, 10) and
(100,000, 50, 100) both cost more CPU than these."""


@contextlib.contextmanager
def fewer_collections() -> Iterator[None]:
    """PLAN_THRESHOLDS inside, the caller's thresholds restored after."""
    saved = gc.get_threshold()
    gc.set_threshold(*PLAN_THRESHOLDS)
    try:
        yield
    finally:
        gc.set_threshold(*saved)
