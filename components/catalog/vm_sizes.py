"""Azure VM sizes the library supports, each row with the page it comes from.

A stack may declare a size this table lacks, in full, under `cluster.vmSizes` (same fields).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class VmSize:
    name: str
    vcpus: int
    memory_gib: int
    gpus: int
    gpu_model: str | None
    infiniband: bool
    accelerated_networking: bool
    max_nics: int
    temp_disk_gib: int
    """The resource (temp) disk; 0 when the size has none. An ephemeral OS disk goes here when it fits."""
    nvme_gb: int
    """Local NVMe data disks in total (decimal GB, as the size pages list them); 0 when none."""
    quota_family: str
    confidential: bool
    source: str
    gpu_vendor: str | None = None
    """Who makes the GPUs ("nvidia"); None on a size without GPUs. The cluster runs one vendor's stack (the gpu
    image's driver, the GPU operator's device plugin and DCGM): SUPPORTED_GPU_VENDORS."""


NVIDIA = "nvidia"
SUPPORTED_GPU_VENDORS = (NVIDIA,)
"""GPU vendors whose node stack the library renders: NVIDIA's driver and container toolkit in the gpu, rack and
confidential images (components/catalog/images.py), the GPU operator's device plugin, DCGM and feature discovery in
the cluster. An AMD size would need AMD's driver and device plugin, which nothing here renders yet."""


_GPU_DOCS = "azure-compute-docs articles/virtual-machines/sizes/gpu-accelerated/"

_SIZES: tuple[VmSize, ...] = (
    # ND: InfiniBand-connected training sizes (../shared/reference/azure.md)
    VmSize("Standard_ND96asr_v4", 96, 900, 8, "A100-SXM4-40GB", True, True, 8, 6000, 0,
           "standardNDASv4_A100Family", False, "azure-docs articles/virtual-machines/nda100-v4-series.md", gpu_vendor=NVIDIA),
    VmSize("Standard_ND96amsr_A100_v4", 96, 1900, 8, "A100-SXM4-80GB", True, True, 8, 6400, 0,
           "standardNDAMSv4_A100Family", False, "azure-docs articles/virtual-machines/ndm-a100-v4-series.md", gpu_vendor=NVIDIA),
    VmSize("Standard_ND96isr_H100_v5", 96, 1900, 8, "H100-80GB-HBM3", True, True, 8, 1000, 28000,
           "standardNDSH100v5Family", False, _GPU_DOCS + "ndh100v5-series.md", gpu_vendor=NVIDIA),
    VmSize("Standard_ND96isr_H200_v5", 96, 1850, 8, "H200-141GB", True, True, 8, 0, 28000,
           "standardNDISRH200V5Family", False, _GPU_DOCS + "nd-h200-v5-series.md (temp disk unconfirmed)", gpu_vendor=NVIDIA),
    # ND GB300 v6 / GB200 v6: Grace (arm64) + 4 GPUs per VM, 18 VMs per NVL72 rack joined by NVLink, one front-end
    # NIC (every pod address is on it), 4 x 800 Gb/s InfiniBand (GB300). Local storage is 4 NVMe disks (16 TB), no
    # resource disk. Quota families: microsoft/aspire src/Aspire.Hosting.Azure.Kubernetes/AksNodeVmSizes.cs
    # (generated from Azure's SKU list: standardNDISRGB300V6Family, standardNDISRGB200V6NDRFamily).
    VmSize("Standard_ND128isr_GB300_v6", 128, 864, 4, "B300-288GB", True, True, 1, 0, 16000,
           "standardNDISRGB300V6Family", False, _GPU_DOCS + "nd-gb300-v6-series.md (ms.date 08/12/2026)",
           gpu_vendor=NVIDIA),
    # The G5 variant: the same page lists it with the same figures in every tab (commit 0c72655c). Its quota family is
    # not in Azure's SKU list as microsoft/aspire generates it (AksNodeVmSizes.cs names only the isr size in
    # standardNDISRGB300V6Family): the family here is the series' and stays unconfirmed until `az vm list-skus` shows it.
    VmSize("Standard_ND128isrG5_GB300_v6", 128, 864, 4, "B300-288GB", True, True, 1, 0, 16000,
           "standardNDISRGB300V6Family", False,
           _GPU_DOCS + "nd-gb300-v6-series.md (ms.date 08/12/2026; quota family unconfirmed)", gpu_vendor=NVIDIA),
    VmSize("Standard_ND128isr_NDR_GB200_v6", 128, 900, 4, "B200-192GB", True, True, 1, 0, 16000,
           "standardNDISRGB200V6NDRFamily", False, _GPU_DOCS + "nd-gb200-v6-series.md (ms.date 03/20/2025)", gpu_vendor=NVIDIA),
    # NC T4: the cheap GPU for dev stacks (no InfiniBand).
    VmSize("Standard_NC4as_T4_v3", 4, 28, 1, "Tesla-T4", False, True, 2, 176, 0,
           "standardNCASv3_T4Family", False, _GPU_DOCS + "ncast4v3-series.md", gpu_vendor=NVIDIA),
    # NCC H100 v5: confidential GPU, no accelerated networking, no InfiniBand.
    VmSize("Standard_NCC40ads_H100_v5", 40, 320, 1, "H100-NVL-94GB", False, False, 8, 800, 0,
           "StandardNCCads2023Family", True, _GPU_DOCS + "nccadsh100v5-series.md (quota family unconfirmed)", gpu_vendor=NVIDIA),
    # General purpose: system and CPU pools.
    VmSize("Standard_D4s_v5", 4, 16, 0, None, False, True, 2, 0, 0,
           "standardDSv5Family", False, "azure-compute-docs articles/virtual-machines/sizes/general-purpose/dsv5-series.md"),
    VmSize("Standard_D8s_v5", 8, 32, 0, None, False, True, 4, 0, 0,
           "standardDSv5Family", False, "azure-compute-docs articles/virtual-machines/sizes/general-purpose/dsv5-series.md"),
    VmSize("Standard_D16ds_v5", 16, 64, 0, None, False, True, 8, 600, 0,
           "standardDDSv5Family", False, "azure-compute-docs articles/virtual-machines/sizes/general-purpose/ddsv5-series.md"),
    VmSize("Standard_D32ds_v5", 32, 128, 0, None, False, True, 8, 1200, 0,
           "standardDDSv5Family", False, "azure-compute-docs articles/virtual-machines/sizes/general-purpose/ddsv5-series.md"),
    VmSize("Standard_D64ds_v5", 64, 256, 0, None, False, True, 8, 2400, 0,
           "standardDDSv5Family", False, "azure-compute-docs articles/virtual-machines/sizes/general-purpose/ddsv5-series.md"),
    # Memory optimised: API servers (heap grows with node count).
    VmSize("Standard_E8ds_v5", 8, 64, 0, None, False, True, 4, 300, 0,
           "standardEDSv5Family", False, "azure-compute-docs articles/virtual-machines/sizes/memory-optimized/edsv5-series.md"),
    VmSize("Standard_E16ds_v5", 16, 128, 0, None, False, True, 8, 600, 0,
           "standardEDSv5Family", False, "azure-compute-docs articles/virtual-machines/sizes/memory-optimized/edsv5-series.md"),
    VmSize("Standard_E32ds_v5", 32, 256, 0, None, False, True, 8, 1200, 0,
           "standardEDSv5Family", False, "azure-compute-docs articles/virtual-machines/sizes/memory-optimized/edsv5-series.md"),
    VmSize("Standard_E48ds_v5", 48, 384, 0, None, False, True, 8, 1800, 0,
           "standardEDSv5Family", False, "azure-compute-docs articles/virtual-machines/sizes/memory-optimized/edsv5-series.md"),
    VmSize("Standard_E64ds_v5", 64, 512, 0, None, False, True, 8, 2400, 0,
           "standardEDSv5Family", False, "azure-compute-docs articles/virtual-machines/sizes/memory-optimized/edsv5-series.md"),
    # Storage optimised with local NVMe: etcd (write latency is what matters).
    VmSize("Standard_L8s_v3", 8, 64, 0, None, False, True, 4, 80, 1920,
           "standardLSv3Family", False, "azure-compute-docs articles/virtual-machines/sizes/storage-optimized/lsv3-series.md"),
    VmSize("Standard_L16s_v3", 16, 128, 0, None, False, True, 8, 160, 3840,
           "standardLSv3Family", False, "azure-compute-docs articles/virtual-machines/sizes/storage-optimized/lsv3-series.md"),
    VmSize("Standard_L32s_v3", 32, 256, 0, None, False, True, 8, 320, 7680,
           "standardLSv3Family", False, "azure-compute-docs articles/virtual-machines/sizes/storage-optimized/lsv3-series.md"),
)

CATALOG: dict[str, VmSize] = {s.name: s for s in _SIZES}

ARM64_SIZES = frozenset({"Standard_ND128isr_GB300_v6", "Standard_ND128isrG5_GB300_v6", "Standard_ND128isr_NDR_GB200_v6"})
"""Sizes whose CPUs are arm64 (NVIDIA Grace: "Processor | 128 vCPUs | Nvidia Grace CPU", azure-compute-docs
sizes/gpu-accelerated/includes/nd-gb300-v6-series-specs.md): their machines boot an Arm64 image."""

