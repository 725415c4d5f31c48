"""Marketplace images the node images are baked from, with where each comes from, pinned to a version.

Machines never boot these directly: Azure VM Image Builder customises them into the cluster's own Compute
Gallery images (components/catalog/node_images.py, docs/images.md). A pinned source means a rebuild starts from
the same bits. Azure keeps a marketplace image version only for a while: Canonical keeps the last 90 release
images per SKU, about two years (ubuntu-cloud-docs, Azure "Image retention policy"). Check a version with
`az vm image show --urn <publisher>:<offer>:<sku>:<version>` before moving the pin, and move it with a new node
image version.
"""

from __future__ import annotations

from gpucluster.spec import ImageRef

UBUNTU_HPC_2204 = ImageRef(publisher="microsoft-dsvm", offer="ubuntu-hpc", sku="2204", version="22.04.2024102301")
"""Ubuntu-HPC 22.04, the source of the GPU image: DOCA OFED (InfiniBand), NCCL, HPC-X (../shared/reference/azure.md;
Azure/azhpc-images ubuntu/ubuntu-22.x at tag ubuntu-hpc-20241023). Version as published in Microsoft Learn's
ND-series HPC examples."""

UBUNTU_HPC_2404_GB = ImageRef(publisher="microsoft-dsvm", offer="ubuntu-hpc", sku="2404-gb", version="24.04.2025110401")
"""Ubuntu-HPC 24.04 for Grace-Blackwell (arm64), the source of the rack image: the image and exact version in
Microsoft's example of a GB300 scale-set VM in an interconnect block (Azure/azure-rest-api-specs Microsoft.Compute
stable 2026-03-01 virtualMachineScaleSetExamples/VirtualMachineScaleSetVM_Get_WithInterconnectBlock.json:
`microsoft-dsvm:ubuntu-hpc:2404-gb`, exactVersion 24.04.2025110401). What it carries (driver, IMEX, DOCA) is not
published per version: docs/rack-scale.md, "Unverified"."""

UBUNTU_2204 = ImageRef(publisher="Canonical", offer="0001-com-ubuntu-server-jammy", sku="22_04-lts-gen2",
                       version="22.04.202608060")
"""Plain Ubuntu 22.04 (Gen2), the source of the CPU, API-server and etcd images."""

UBUNTU_CVM_2404 = ImageRef(publisher="Canonical", offer="ubuntu-24_04-lts", sku="cvm", version="24.04.202606070")
"""Ubuntu 24.04 confidential-VM image, the source of the confidential GPU image: the image and version
Azure/az-cgpu-onboarding pins for `--os-distribution Ubuntu24.04` (release V4.3.3,
`src/cgpu-h100-auto-onboarding.sh`, `create_vm`). docs/confidential.md says why 24.04."""


def is_confidential_image(image: ImageRef) -> bool:
    """Azure's confidential-VM images carry `confidential-vm` in the offer or `cvm` in the SKU."""
    return "confidential-vm" in image.offer.lower() or "cvm" in image.sku.lower()
