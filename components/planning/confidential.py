"""Confidential-VM settings of a `kind: confidential` pool and the checks Azure imposes on them.

Facts (../shared/reference/azure.md, confidential section): NCC sizes need securityType
ConfidentialVM with secure boot and vTPM, a confidential-VM image (the cluster's `confidential` node image,
built from Ubuntu's 24.04 CVM image: components/catalog/node_images.py), no accelerated networking, no
InfiniBand. The OS disk's `securityEncryptionType` is `VMGuestStateOnly` or `DiskWithVMGuestState`,
in scale sets too (Azure quickstart `demos/vmss-cvm-fde`: a Uniform scale set with
`DiskWithVMGuestState` and a disk encryption set). A customer-managed key sits in a Key Vault
(RSA-HSM, exportable) behind a disk encryption set of type `ConfidentialVmEncryptedWithCustomerKey`,
and requires `DiskWithVMGuestState` (confidential VM FAQ; Azure/az-cgpu-onboarding
`src/cgpu-h100-auto-onboarding.sh`: "CMK only supports encryption type DiskWithVMGuestState").
The key's release policy admits only attested CVMs.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass

from gpucluster.catalog.attestation import SHARED_ATTESTATION
from gpucluster.catalog.vm_sizes import VmSize
from gpucluster.errors import Problem, pool_path
from gpucluster.spec import PoolKind, PoolSpec

SECURITY_TYPE = "ConfidentialVM"
GUEST_STATE_ONLY = "VMGuestStateOnly"
DISK_WITH_GUEST_STATE = "DiskWithVMGuestState"
CUSTOMER_KEY_ENCRYPTION = DISK_WITH_GUEST_STATE
"""The only encryption type a customer-managed key (a confidential disk encryption set) works with."""
DISK_ENCRYPTION_SET_TYPE = "ConfidentialVmEncryptedWithCustomerKey"
KEY_TYPE = "RSA-HSM"
KEY_SIZE = 3072


@dataclass(frozen=True)
class CustomerKeyPlan:
    orchestrator_object_id: str
    attestation_authority: str

    def release_policy(self) -> dict[str, object]:
        """The default CVM key-release policy: released only to an Azure-compliant SEV-SNP CVM."""
        return {
            "version": "1.0.0",
            "anyOf": [{
                "authority": self.attestation_authority,
                "allOf": [
                    {"claim": "x-ms-attestation-type", "equals": "sevsnpvm"},
                    {"claim": "x-ms-compliance-status", "equals": "azure-compliant-cvm"},
                ],
            }],
        }

    def release_policy_data(self) -> str:
        """Key Vault wants the policy as base64url without padding."""
        raw = json.dumps(self.release_policy(), separators=(",", ":")).encode()
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")


@dataclass(frozen=True)
class ConfidentialPlan:
    security_type: str
    secure_boot: bool
    vtpm: bool
    os_disk_encryption: str
    customer_key: CustomerKeyPlan | None


def check_confidential(index: int, pool: PoolSpec, size: VmSize, location: str) -> list[Problem]:
    """Problems with a pool's confidential settings, one line each, naming the key to change."""
    settings = pool.confidential
    if pool.kind is not PoolKind.CONFIDENTIAL:
        if settings is not None:
            return [Problem(pool_path(index, "confidential"),
                            "only pools of kind: confidential take confidential settings; remove the block or change kind")]
        return []
    problems: list[Problem] = []
    if pool.accelerated_networking:
        problems.append(Problem(pool_path(index, "acceleratedNetworking"),
                                f"{size.name} (confidential) has no accelerated networking; remove the key or set it false"))
    if pool.infiniband:
        problems.append(Problem(pool_path(index, "infiniband"),
                                f"{size.name} (confidential) has no InfiniBand; remove the key or set it false"))
    key = settings.customer_managed_key if settings else None
    if key is not None and settings is not None and settings.os_disk_encryption == GUEST_STATE_ONLY:
        problems.append(Problem(pool_path(index, "confidential.osDiskEncryption"),
                                f"a customer-managed key requires {CUSTOMER_KEY_ENCRYPTION} (Azure refuses a confidential "
                                f"disk encryption set with {GUEST_STATE_ONLY}); set {CUSTOMER_KEY_ENCRYPTION} or remove "
                                "the key to use it with platform-managed keys"))
    if key is not None and key.attestation_authority is None and location not in SHARED_ATTESTATION:
        problems.append(Problem(pool_path(index, "confidential.customerManagedKey.attestationAuthority"),
                                f"no shared attestation provider is catalogued for {location}; set the MAA endpoint "
                                "the key-release policy should trust"))
    return problems


def plan_confidential(pool: PoolSpec, location: str) -> ConfidentialPlan | None:
    """Call after `check_confidential` found no problems."""
    if pool.kind is not PoolKind.CONFIDENTIAL:
        return None
    key = pool.confidential.customer_managed_key if pool.confidential else None
    chosen = pool.confidential.os_disk_encryption if pool.confidential else None
    customer_key = None
    if key is not None:
        authority = key.attestation_authority or SHARED_ATTESTATION[location]
        customer_key = CustomerKeyPlan(key.orchestrator_object_id, authority)
    encryption = chosen or (CUSTOMER_KEY_ENCRYPTION if customer_key else GUEST_STATE_ONLY)
    return ConfidentialPlan(security_type=SECURITY_TYPE, secure_boot=True, vtpm=True,
                            os_disk_encryption=encryption, customer_key=customer_key)
