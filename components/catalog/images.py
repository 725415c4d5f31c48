"""Marketplace images the library boots, with where each comes from, pinned to a version.

A pinned version means a scale-out boots the same build as the VMs already running (one driver and OFED
build per InfiniBand domain). Azure keeps a marketplace image version only for a while: Canonical keeps the
last 90 release images per SKU, about two years (ubuntu-cloud-docs, Azure "Image retention policy"). Check a
version with `az vm image show --urn <publisher>:<offer>:<sku>:<version>` before moving the pin, and move it
in its own change: on scale sets it reaches new VMs (and reimaged ones); existing VMs keep theirs.
"""

from __future__ import annotations

from components.spec import ImageRef

UBUNTU_HPC_2204 = ImageRef(publisher="microsoft-dsvm", offer="ubuntu-hpc", sku="2204", version="22.04.2024102301")
"""Ubuntu-HPC 22.04 for GPU and CPU nodes: InfiniBand and NVIDIA drivers preinstalled (../shared/reference/azure.md;
Azure/azhpc-images ubuntu/ubuntu-22.x). Version as published in Microsoft Learn's ND-series HPC examples."""

UBUNTU_2204 = ImageRef(publisher="Canonical", offer="0001-com-ubuntu-server-jammy", sku="22_04-lts-gen2",
                       version="22.04.202608060")
"""Plain Ubuntu 22.04 (Gen2) for API servers and etcd: no drivers needed."""

UBUNTU_CVM_2204 = ImageRef(publisher="Canonical", offer="0001-com-ubuntu-confidential-vm-jammy", sku="22_04-lts-cvm",
                           version="22.04.202608270")
"""Ubuntu 22.04 confidential-VM image for NCC pools (../shared/reference/azure.md, confidential section)."""


def is_confidential_image(image: ImageRef) -> bool:
    """Azure's confidential-VM images carry `confidential-vm` in the offer or `cvm` in the SKU."""
    return "confidential-vm" in image.offer.lower() or "cvm" in image.sku.lower()
