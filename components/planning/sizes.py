"""VM sizes a stack may use: the catalogue plus the sizes the stack declares in full."""

from __future__ import annotations

from components.catalog.vm_sizes import CATALOG, VmSize
from components.spec import ClusterSpec


def size_table(spec: ClusterSpec) -> dict[str, VmSize]:
    table = dict(CATALOG)
    for name, custom in spec.vm_sizes.items():
        table[name] = VmSize(name=name, **custom.model_dump())
    return table


def unknown_size_message(name: str, table: dict[str, VmSize]) -> str:
    close = [n for n in table if n.lower().startswith(name.lower()[:11])][:3]
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    return (f"unknown VM size {name!r}{hint} Declare it in full under cluster.vmSizes "
            "if the catalogue lacks it")
