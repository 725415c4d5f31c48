"""An etcd cluster as individual, protected VMs: one per planned member, each in its zone at its address."""

from __future__ import annotations

import base64
from dataclasses import dataclass

import pulumi
import pulumi_azure_native as azure

from gpucluster.azure.node_images import ImageIds
from gpucluster.azure.pki import ClusterPki
from gpucluster.azure.scale_set.body import NodeAccess, gallery_image, linux_configuration
from gpucluster.azure.scope import AzureScope
from gpucluster.bootstrap.etcd import EtcdMember, render_etcd_cloud_init
from gpucluster.bootstrap.from_plan import EtcdSecrets, etcd_bootstrap
from gpucluster.planning.cluster_plan import ClusterPlan
from gpucluster.planning.control_plane import ETCD_DISK_GIB, ETCD_OS_DISK_GIB, EtcdPlan, Member
from gpucluster.planning.pki import ETCD_CA, etcd_member_certificates
from gpucluster.planning.tags import machine_tags


def _custom_data(cluster: ClusterPlan, plan: EtcdPlan, member: Member, pki: ClusterPki,
                 snapshot_url: pulumi.Output[str]) -> pulumi.Output[str]:
    names = etcd_member_certificates(member.name)
    certs = {field: pki.certificates[name] for field, name in names.items()}
    etcd_ca_key, etcd_ca = pki.cas[ETCD_CA]

    def render(args: list[str]) -> str:
        ca, server_cert, server_key, peer_cert, peer_key, client_cert, client_key, url, ca_key = args
        text = render_etcd_cloud_init(etcd_bootstrap(cluster, plan, member, EtcdSecrets(
            ca_cert=ca, server_cert=server_cert, server_key=server_key, peer_cert=peer_cert, peer_key=peer_key,
            client_cert=client_cert, client_key=client_key, snapshot_url=url, ca_key=ca_key)))
        return base64.b64encode(text.encode()).decode()

    return pulumi.Output.secret(pulumi.Output.all(
        etcd_ca.cert_pem, certs["server"].cert.cert_pem, certs["server"].key.private_key_pem,
        certs["peer"].cert.cert_pem, certs["peer"].key.private_key_pem, certs["client"].cert.cert_pem,
        certs["client"].key.private_key_pem, snapshot_url, etcd_ca_key.private_key_pem).apply(render))


@dataclass(frozen=True)
class EtcdClusterArgs:
    """The inputs of EtcdCluster."""

    scope: AzureScope
    """Where the members and their NICs go (they carry the machine tags, not the stack's)."""
    cluster_plan: ClusterPlan
    """The cluster plan: the members' addresses and boot facts, the images they boot."""
    plan: EtcdPlan
    """This etcd cluster's plan (`control_plane.etcd` or `control_plane.events`): members, zones, size."""
    subnet_id: pulumi.Input[str]
    """The etcd subnet."""
    pki: ClusterPki
    """The etcd CA and the members' certificates."""
    snapshot_url: pulumi.Output[str]
    """The blob container the members write snapshots to."""
    access: NodeAccess
    """The admin user and SSH keys."""
    images: ImageIds
    """The cluster's node image versions (NodeImages.ids)."""


class EtcdCluster(pulumi.ComponentResource):
    """Stateful members: plain VMs (nothing may replace them behind etcd's back), `protect`ed."""

    vms: list[azure.compute.VirtualMachine]
    """The members, in plan order (each depends on the one before)."""
    principal_ids: list[pulumi.Output[str]]
    """Each member's system-assigned identity (it writes snapshots to the account)."""

    def __init__(self, name: str, args: EtcdClusterArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpucluster:azure:EtcdCluster", name, None, opts)
        cluster_plan, plan, subnet_id, pki = args.cluster_plan, args.plan, args.subnet_id, args.pki
        snapshot_url, access, images = args.snapshot_url, args.access, args.images
        resource_group_name, location = args.scope.resource_group_name, args.scope.location
        cluster = cluster_plan.spec.name
        addresses = cluster_plan.boot.etcd_addresses
        peers = tuple(EtcdMember(m.name, addresses[m.name]) for m in plan.members)
        tags = machine_tags(cluster, "etcd-events" if plan.role == "etcd-events" else "etcd", plan.role, {})
        self.vms = []
        for member, peer in zip(plan.members, peers, strict=True):
            stateful = pulumi.ResourceOptions(parent=self, protect=True)
            nic = azure.network.NetworkInterface(
                f"{member.name}-nic", resource_group_name=resource_group_name, location=location, tags=tags,
                network_interface_name=f"{member.name}-nic", enable_accelerated_networking=plan.size.accelerated_networking,
                ip_configurations=[azure.network.NetworkInterfaceIPConfigurationArgs(
                    name="primary", primary=True, private_ip_allocation_method="Static",
                    private_ip_address=peer.address, subnet=azure.network.SubnetArgs(id=subnet_id))],
                opts=stateful)
            data_disks = [] if plan.data_on_nvme else [azure.compute.DataDiskArgs(
                lun=0, create_option="Empty", disk_size_gb=ETCD_DISK_GIB, caching=azure.compute.CachingTypes.NONE,
                managed_disk=azure.compute.ManagedDiskParametersArgs(storage_account_type="PremiumV2_LRS"))]
            vm = azure.compute.VirtualMachine(
                member.name, vm_name=member.name, resource_group_name=resource_group_name, location=location,
                zones=[member.zone], tags=tags,
                hardware_profile=azure.compute.HardwareProfileArgs(vm_size=plan.size.name),
                identity=azure.compute.VirtualMachineIdentityArgs(
                    type=azure.compute.ResourceIdentityType.SYSTEM_ASSIGNED),
                network_profile=azure.compute.NetworkProfileArgs(network_interfaces=[
                    azure.compute.NetworkInterfaceReferenceArgs(id=nic.id, primary=True)]),
                os_profile=azure.compute.OSProfileArgs(
                    computer_name=member.name, admin_username=access.admin_username,
                    custom_data=_custom_data(cluster_plan, plan, member, pki, snapshot_url),
                    linux_configuration=linux_configuration(access)),
                storage_profile=azure.compute.StorageProfileArgs(
                    image_reference=gallery_image(images.of(cluster_plan.images.machines[member.name])),
                    os_disk=azure.compute.OSDiskArgs(
                        create_option="FromImage", caching=azure.compute.CachingTypes.READ_WRITE, disk_size_gb=ETCD_OS_DISK_GIB,
                        managed_disk=azure.compute.ManagedDiskParametersArgs(storage_account_type="Premium_LRS"),
                        delete_option="Delete"),
                    data_disks=data_disks),
                # customData is create-only on Azure; certificate rotation goes through the runbook, not a replace.
                # The image is fixed at creation too (Azure: "Changing property 'imageReference' is not allowed",
                # pulumi/pulumi-azure-native#1117): a member keeps the one it was created with.
                # Each member depends on the one before: Pulumi updates (resizes, restarts) them one at a time,
                # so a change never takes more than one member of the quorum down at once.
                opts=pulumi.ResourceOptions(parent=self, protect=True,
                                            ignore_changes=["osProfile.customData", "storageProfile.imageReference"],
                                            depends_on=self.vms[-1:]))
            self.vms.append(vm)
        self.principal_ids = [vm.identity.apply(lambda i: i.principal_id if i else "") for vm in self.vms]
        self.register_outputs({"members": [vm.name for vm in self.vms]})
