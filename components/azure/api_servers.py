"""The API servers: a stateless, self-healing zone-spanning scale set behind the internal load balancer."""

from __future__ import annotations

import base64
from dataclasses import dataclass

import pulumi
import pulumi_azure_native as azure

from gpucluster.azure.node_images import ImageIds
from gpucluster.azure.pki import ClusterPki
from gpucluster.azure.registry import RegistryAccess
from gpucluster.azure.scale_set.body import NodeAccess, gallery_image, linux_configuration
from gpucluster.azure.scope import AzureScope
from gpucluster.bootstrap.apiserver import render_apiserver_cloud_init
from gpucluster.bootstrap.from_plan import (
    APISERVER_PKI_CAS,
    APISERVER_PKI_LEAVES,
    PullIdentity,
    apiserver_bootstrap,
    apiserver_pki_paths,
)
from gpucluster.planning.cluster_plan import ClusterPlan
from gpucluster.planning.control_plane import API_SERVER_OS_DISK_GIB
from gpucluster.planning.node_images import API_SCALE_SET
from gpucluster.planning.pod_addresses import api_server_pod_addresses
from gpucluster.planning.tags import machine_tags
from gpucluster.vocabulary import KUBERNETES_EOL_TAG, KUBERNETES_VERSION_TAG


def _pki_outputs(pki: ClusterPki) -> dict[str, pulumi.Output[str]]:
    files: dict[str, pulumi.Output[str]] = {}
    for ca, (cert_path, key_path) in APISERVER_PKI_CAS.items():
        key, cert = pki.cas[ca]
        files[cert_path] = cert.cert_pem
        if key_path:
            files[key_path] = key.private_key_pem
    files["sa.key"] = pki.service_account_key.private_key_pem
    files["sa.pub"] = pki.service_account_key.public_key_pem
    for name in APISERVER_PKI_LEAVES:
        files[f"{name}.crt"] = pki.certificates[name].cert.cert_pem
        files[f"{name}.key"] = pki.certificates[name].key.private_key_pem
    assert tuple(sorted(files)) == apiserver_pki_paths()
    return files


@dataclass(frozen=True)
class ApiServersArgs:
    """What the API servers' scale set is built from."""

    scope: AzureScope
    """Where it goes (its resource group)."""
    plan: ClusterPlan
    """The cluster plan: the API servers' size, count and zones (`plan.control_plane.api`), their boot facts."""
    subnet_id: pulumi.Input[str]
    """The control-plane subnet."""
    backend_pool_id: pulumi.Input[str]
    """The internal load balancer's backend pool the instances join."""
    probe_id: pulumi.Input[str]
    """The load balancer's `/readyz` probe: the scale set's health probe."""
    pki: ClusterPki
    """The certificates and keys the boot document carries."""
    access: NodeAccess
    """The admin user and SSH keys."""
    registry: RegistryAccess
    """The pull identity the instances carry."""
    images: ImageIds
    """The cluster's node image versions (NodeImages.ids)."""


def api_server_scale_set(name: str, args: ApiServersArgs,
                         opts: pulumi.ResourceOptions) -> azure.compute.VirtualMachineScaleSet:
    plan, subnet_id, backend_pool_id, probe_id = args.plan, args.subnet_id, args.backend_pool_id, args.probe_id
    resource_group_name, pki, access, registry, images = (args.scope.resource_group_name, args.pki, args.access,
                                                          args.registry, args.images)
    spec, cp = plan.spec, plan.control_plane
    files = _pki_outputs(pki)
    keys = sorted(files)

    def render(values: list[str]) -> str:
        *pems, client_id, tenant = values
        text = render_apiserver_cloud_init(
            apiserver_bootstrap(plan, dict(zip(keys, pems, strict=True)), PullIdentity(client_id, tenant)))
        return base64.b64encode(text.encode()).decode()

    custom_data = pulumi.Output.secret(pulumi.Output.all(
        *(files[k] for k in keys), registry.client_id, registry.tenant_id).apply(render))
    return azure.compute.VirtualMachineScaleSet(
        name, vm_scale_set_name=API_SCALE_SET, resource_group_name=resource_group_name, location=spec.location,
        zones=list(cp.api.zones), zone_balance=True,
        sku=azure.compute.SkuArgs(name=cp.api.size.name, tier="Standard", capacity=cp.api.count),
        orchestration_mode="Uniform", single_placement_group=False, platform_fault_domain_count=1, overprovision=False,
        upgrade_policy=azure.compute.UpgradePolicyArgs(mode=azure.compute.UpgradeMode.MANUAL),
        # Stateless: a VM that fails the load balancer's /readyz probe is replaced.
        automatic_repairs_policy=azure.compute.AutomaticRepairsPolicyArgs(enabled=True, grace_period="PT30M"),
        # The registry pull identity: the kubelet pulls kubeadm's control-plane images with it.
        identity=azure.compute.VirtualMachineScaleSetIdentityArgs(
            type=azure.compute.ResourceIdentityType.SYSTEM_ASSIGNED_USER_ASSIGNED,
            user_assigned_identities=[registry.identity_id]),
        virtual_machine_profile=azure.compute.VirtualMachineScaleSetVMProfileArgs(
            os_profile=azure.compute.VirtualMachineScaleSetOSProfileArgs(
                computer_name_prefix=API_SCALE_SET, admin_username=access.admin_username, custom_data=custom_data,
                linux_configuration=linux_configuration(access)),
            storage_profile=azure.compute.VirtualMachineScaleSetStorageProfileArgs(
                image_reference=gallery_image(images.of(plan.images.machines[API_SCALE_SET])),
                os_disk=azure.compute.VirtualMachineScaleSetOSDiskArgs(
                    create_option="FromImage", caching=azure.compute.CachingTypes.READ_WRITE, disk_size_gb=API_SERVER_OS_DISK_GIB,
                    managed_disk=azure.compute.VirtualMachineScaleSetManagedDiskParametersArgs(
                        storage_account_type="Premium_LRS"))),
            network_profile=azure.compute.VirtualMachineScaleSetNetworkProfileArgs(
                health_probe=azure.compute.ApiEntityReferenceArgs(id=probe_id),
                network_interface_configurations=[azure.compute.VirtualMachineScaleSetNetworkConfigurationArgs(
                    name="nic0", primary=True, enable_accelerated_networking=cp.api.size.accelerated_networking,
                    ip_configurations=[azure.compute.VirtualMachineScaleSetIPConfigurationArgs(
                        name="primary", primary=True, subnet=azure.compute.ApiEntityReferenceArgs(id=subnet_id),
                        load_balancer_backend_address_pools=[azure.compute.SubResourceArgs(id=backend_pool_id)]),
                        # In prefix mode Cilium's agent here takes only what the prefix IPAM controller publishes
                        # from this NIC: its own addresses and NFD's worker (planning/pod_addresses.py).
                        *(azure.compute.VirtualMachineScaleSetIPConfigurationArgs(
                            name=f"pod{i:03d}", primary=False, private_ip_address_version="IPv4",
                            subnet=azure.compute.ApiEntityReferenceArgs(id=subnet_id))
                          for i in range(1, api_server_pod_addresses(spec) + 1))])])),
        tags={**machine_tags(spec.name, "apiserver", API_SCALE_SET, spec.tags),
              KUBERNETES_VERSION_TAG: spec.kubernetes_version,
              KUBERNETES_EOL_TAG: plan.versions.release.end_of_life.isoformat()},
        opts=opts)
