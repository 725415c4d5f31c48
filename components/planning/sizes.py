"""VM sizes a stack may use: the catalogue plus the sizes the stack declares in full."""

from __future__ import annotations

from gpucluster.catalog.vm_sizes import CATALOG, SUPPORTED_GPU_VENDORS, VmSize
from gpucluster.errors import Problem
from gpucluster.spec import ClusterSpec


def size_table(spec: ClusterSpec) -> dict[str, VmSize]:
    table = dict(CATALOG)
    for name, custom in spec.vm_sizes.items():
        table[name] = VmSize(name=name, **custom.model_dump())
    return table


def check_custom_sizes(spec: ClusterSpec) -> list[Problem]:
    """A declared GPU size names its GPUs' vendor, and one whose stack the library renders."""
    problems = []
    supported = ", ".join(SUPPORTED_GPU_VENDORS)
    for name, size in spec.vm_sizes.items():
        path = f"cluster.vmSizes.{name}.gpuVendor"
        if size.gpus and size.gpu_vendor is None:
            problems.append(Problem(path, f"a size with GPUs names their vendor: add gpuVendor ({supported})"))
        elif size.gpu_vendor is not None and not size.gpus:
            problems.append(Problem(path, "a size without GPUs has no GPU vendor: remove gpuVendor or set gpus"))
        elif size.gpu_vendor is not None and size.gpu_vendor not in SUPPORTED_GPU_VENDORS:
            problems.append(Problem(path, f"{size.gpu_vendor} GPUs are not supported yet: the nodes run NVIDIA's "
                                    f"driver, device plugin and DCGM (docs/images.md); supported: {supported}"))
    return problems


def unknown_size_message(name: str, table: dict[str, VmSize]) -> str:
    close = [n for n in table if n.lower().startswith(name.lower()[:11])][:3]
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    return (f"unknown VM size {name!r}{hint} Declare it in full under cluster.vmSizes "
            "if the catalogue lacks it")
