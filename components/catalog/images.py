"""Marketplace images the library boots, with where each comes from."""

from __future__ import annotations

from components.spec import ImageRef

UBUNTU_HPC_2204 = ImageRef(publisher="microsoft-dsvm", offer="ubuntu-hpc", sku="2204", version="latest")
"""Ubuntu-HPC 22.04 for GPU and CPU nodes: InfiniBand and NVIDIA drivers preinstalled (../shared/reference/azure.md)."""

UBUNTU_2204 = ImageRef(publisher="Canonical", offer="0001-com-ubuntu-server-jammy", sku="22_04-lts-gen2",
                       version="latest")
"""Plain Ubuntu 22.04 (Gen2) for API servers and etcd: no drivers needed."""

UBUNTU_CVM_2204 = ImageRef(publisher="Canonical", offer="0001-com-ubuntu-confidential-vm-jammy", sku="22_04-lts-cvm",
                           version="latest")
"""Ubuntu 22.04 confidential-VM image for NCC pools (../shared/reference/azure.md, confidential section)."""


def is_confidential_image(image: ImageRef) -> bool:
    """Azure's confidential-VM images carry `confidential-vm` in the offer or `cvm` in the SKU."""
    return "confidential-vm" in image.offer.lower() or "cvm" in image.sku.lower()
