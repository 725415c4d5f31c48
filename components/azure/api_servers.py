"""The API servers: a stateless, self-healing zone-spanning scale set behind the internal load balancer."""

from __future__ import annotations

import base64

import pulumi
import pulumi_azure_native as azure

from components.azure.node_pool import NodeAccess, image_reference, linux_configuration
from components.azure.pki import ClusterPki
from components.azure.tags import machine_tags
from components.bootstrap.apiserver import ApiServerBootstrap, render_apiserver_cloud_init
from components.bootstrap.node import install_script
from components.catalog.images import UBUNTU_2204
from components.planning.cluster_plan import ClusterPlan
from components.planning.control_plane import EtcdPlan
from components.planning.pki import CLUSTER_CA, ETCD_CA, FRONT_PROXY_CA

API_SCALE_SET = "apiserver"


def _endpoints(etcd: EtcdPlan | None, addresses: dict[str, str]) -> tuple[str, ...]:
    return tuple(f"https://{addresses[m.name]}:2379" for m in etcd.members) if etcd else ()


def _pki_outputs(pki: ClusterPki) -> dict[str, pulumi.Output[str]]:
    ca_key, ca = pki.cas[CLUSTER_CA]
    fp_key, fp = pki.cas[FRONT_PROXY_CA]
    _, etcd_ca = pki.cas[ETCD_CA]
    files = {"ca.crt": ca.cert_pem, "ca.key": ca_key.private_key_pem, "front-proxy-ca.crt": fp.cert_pem,
             "front-proxy-ca.key": fp_key.private_key_pem, "etcd/ca.crt": etcd_ca.cert_pem,
             "sa.key": pki.service_account_key.private_key_pem, "sa.pub": pki.service_account_key.public_key_pem}
    for name in ("apiserver", "apiserver-kubelet-client", "apiserver-etcd-client", "front-proxy-client"):
        files[f"{name}.crt"] = pki.certificates[name].cert.cert_pem
        files[f"{name}.key"] = pki.certificates[name].key.private_key_pem
    return files


def api_server_scale_set(name: str, plan: ClusterPlan, addresses: dict[str, str], subnet_id: pulumi.Input[str],
                         backend_pool_id: pulumi.Input[str], probe_id: pulumi.Input[str],
                         resource_group_name: pulumi.Input[str], pki: ClusterPki, token: pulumi.Output[str],
                         access: NodeAccess, opts: pulumi.ResourceOptions) -> azure.compute.VirtualMachineScaleSet:
    spec, cp = plan.spec, plan.control_plane
    files = _pki_outputs(pki)
    keys = sorted(files)

    def render(values: list[str]) -> str:
        text = render_apiserver_cloud_init(ApiServerBootstrap(
            cluster=spec.name, kubernetes_version=spec.kubernetes_version, endpoint=plan.ip.api_server_endpoint,
            service_cidr=str(plan.ip.service_cidr), etcd_endpoints=_endpoints(cp.etcd, addresses),
            events_etcd_endpoints=_endpoints(cp.events, addresses), bootstrap_token=values[-1],
            flags=cp.api.flags, pki_files=dict(zip(keys, values[:-1], strict=True)),
            gang_timeout_seconds=spec.in_cluster.gang_timeout_seconds),
            install_script(spec.kubernetes_version))
        return base64.b64encode(text.encode()).decode()

    custom_data = pulumi.Output.secret(pulumi.Output.all(*(files[k] for k in keys), token).apply(render))
    return azure.compute.VirtualMachineScaleSet(
        name, vm_scale_set_name=API_SCALE_SET, resource_group_name=resource_group_name, location=spec.location,
        zones=list(cp.api.zones), zone_balance=True,
        sku=azure.compute.SkuArgs(name=cp.api.size.name, tier="Standard", capacity=cp.api.count),
        orchestration_mode="Uniform", single_placement_group=False, platform_fault_domain_count=1, overprovision=False,
        upgrade_policy=azure.compute.UpgradePolicyArgs(mode=azure.compute.UpgradeMode.MANUAL),
        # Stateless: a VM that fails the load balancer's /readyz probe is replaced.
        automatic_repairs_policy=azure.compute.AutomaticRepairsPolicyArgs(enabled=True, grace_period="PT30M"),
        identity=azure.compute.VirtualMachineScaleSetIdentityArgs(
            type=azure.compute.ResourceIdentityType.SYSTEM_ASSIGNED),
        virtual_machine_profile=azure.compute.VirtualMachineScaleSetVMProfileArgs(
            os_profile=azure.compute.VirtualMachineScaleSetOSProfileArgs(
                computer_name_prefix=API_SCALE_SET, admin_username=access.admin_username, custom_data=custom_data,
                linux_configuration=linux_configuration(access)),
            storage_profile=azure.compute.VirtualMachineScaleSetStorageProfileArgs(
                image_reference=image_reference(UBUNTU_2204),
                os_disk=azure.compute.VirtualMachineScaleSetOSDiskArgs(
                    create_option="FromImage", caching=azure.compute.CachingTypes.READ_WRITE, disk_size_gb=128,
                    managed_disk=azure.compute.VirtualMachineScaleSetManagedDiskParametersArgs(
                        storage_account_type="Premium_LRS"))),
            network_profile=azure.compute.VirtualMachineScaleSetNetworkProfileArgs(
                health_probe=azure.compute.ApiEntityReferenceArgs(id=probe_id),
                network_interface_configurations=[azure.compute.VirtualMachineScaleSetNetworkConfigurationArgs(
                    name="nic0", primary=True, enable_accelerated_networking=cp.api.size.accelerated_networking,
                    ip_configurations=[azure.compute.VirtualMachineScaleSetIPConfigurationArgs(
                        name="primary", primary=True, subnet=azure.compute.ApiEntityReferenceArgs(id=subnet_id),
                        load_balancer_backend_address_pools=[azure.compute.SubResourceArgs(id=backend_pool_id)])])])),
        tags=machine_tags(spec.name, "apiserver", API_SCALE_SET, spec.tags),
        opts=opts)
