"""The deployment runner: one small Linux VM in the control-plane subnet, no public IP, with a user-assigned identity
that holds Contributor and a conditioned Role Based Access Control Administrator on the cluster's resource group.
Step 1 of the first `pulumi up` creates it (nothing here depends on the join access); step 2 and every later update
run on it through a managed Run Command (components/planning/runner_step2.py, docs/operations.md "First bootstrap")."""

from __future__ import annotations

import base64
from dataclasses import dataclass

import pulumi
import pulumi_azure_native as azure

from gpucluster.azure.network import NetworkRefs
from gpucluster.azure.scale_set.body import NodeAccess, linux_configuration
from gpucluster.azure.scope import AzureScope
from gpucluster.bootstrap.deploy_runner import render_runner_cloud_init
from gpucluster.catalog.azure_roles import MONITORING_READER, role_definition_id
from gpucluster.catalog.deploy_runner import CONDITION_VERSION, PRIVILEGED_ROLES, delegation_condition
from gpucluster.planning.deploy_runner import OS_DISK_GIB, DeployRunnerPlan
from gpucluster.planning.ip_plan import CONTROL_PLANE_BLOCK
from gpucluster.planning.tags import machine_tags

PRINCIPAL_TYPE = "ServicePrincipal"
"""Every identity the stack assigns roles to is a managed identity, a service principal."""


@dataclass(frozen=True)
class DeployRunnerArgs:
    """The inputs of DeployRunner."""

    scope: AzureScope
    """Where the runner, its NIC and identity go; its roles are assigned on the scope's resource group."""
    plan: DeployRunnerPlan
    """The runner's plan (`plan.deploy_runner`): VM name, size, zone, image and the roles its identity holds."""
    network: NetworkRefs
    """The control-plane subnet its NIC joins."""
    access: NodeAccess
    """The admin user and SSH keys."""


class DeployRunner(pulumi.ComponentResource):
    """The VM inside the VNet that step 2 of the first `pulumi up` and every later update run on."""

    vm: azure.compute.VirtualMachine
    """The runner (its OS profile and image fixed at creation)."""
    client_id: pulumi.Output[str]
    """Its identity's client id: step 2's Run Command signs in as it."""

    def __init__(self, name: str, args: DeployRunnerArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpucluster:azure:DeployRunner", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        plan, network, access, where = args.plan, args.network, args.access, args.scope
        rg = where.resource_group_name
        tags = machine_tags(where.cluster, "deploy-runner", "deploy-runner", dict(where.tags))
        subscription_id = pulumi.Output.from_input(where.subscription_id)
        self.identity = azure.managedidentity.UserAssignedIdentity(
            f"{name}-identity", resource_group_name=rg, location=where.location, tags=tags, opts=child)
        scope = pulumi.Output.concat("/subscriptions/", subscription_id, "/resourceGroups/", rg)
        self.role_assignments = [
            azure.authorization.RoleAssignment(
                f"{name}-{index}-role", principal_id=self.identity.principal_id, principal_type=PRINCIPAL_TYPE,
                role_definition_id=subscription_id.apply(lambda sub, role=role.role: role_definition_id(sub, role)),
                scope=scope, description=f"gpucluster deployment runner: {role.why}"[:1024],
                condition=delegation_condition(PRIVILEGED_ROLES, PRINCIPAL_TYPE) if role.conditional else None,
                condition_version=CONDITION_VERSION if role.conditional else None, opts=child)
            for index, role in enumerate(plan.roles)]
        nic = azure.network.NetworkInterface(
            f"{name}-nic", resource_group_name=rg, location=where.location, tags=tags,
            network_interface_name=f"{plan.vm_name}-nic",
            enable_accelerated_networking=plan.size.accelerated_networking,
            ip_configurations=[azure.network.NetworkInterfaceIPConfigurationArgs(
                name="primary", primary=True, private_ip_allocation_method="Dynamic",
                subnet=azure.network.SubnetArgs(id=network.subnet_ids[CONTROL_PLANE_BLOCK]))],
            opts=child)
        image = plan.image
        self.vm = azure.compute.VirtualMachine(
            name, vm_name=plan.vm_name, resource_group_name=rg, location=where.location, zones=[plan.zone],
            tags=tags, hardware_profile=azure.compute.HardwareProfileArgs(vm_size=plan.size.name),
            identity=azure.compute.VirtualMachineIdentityArgs(
                type=azure.compute.ResourceIdentityType.USER_ASSIGNED, user_assigned_identities=[self.identity.id]),
            network_profile=azure.compute.NetworkProfileArgs(network_interfaces=[
                azure.compute.NetworkInterfaceReferenceArgs(id=nic.id, primary=True)]),
            os_profile=azure.compute.OSProfileArgs(
                computer_name=plan.vm_name, admin_username=access.admin_username,
                # Nothing secret in it; a secret all the same, as every machine's customData is (policies/rules).
                custom_data=pulumi.Output.secret(base64.b64encode(render_runner_cloud_init().encode()).decode()),
                linux_configuration=linux_configuration(access)),
            storage_profile=azure.compute.StorageProfileArgs(
                image_reference=azure.compute.ImageReferenceArgs(
                    publisher=image.publisher, offer=image.offer, sku=image.sku, version=image.version),
                os_disk=azure.compute.OSDiskArgs(
                    create_option="FromImage", caching=azure.compute.CachingTypes.READ_WRITE, disk_size_gb=OS_DISK_GIB,
                    managed_disk=azure.compute.ManagedDiskParametersArgs(storage_account_type="Premium_LRS"),
                    delete_option="Delete")),
            # The OS profile (boot text, admin user, SSH keys) and the image are fixed at creation: Azure refuses most
            # changes to them on a running VM, and the machine a running step 2 is on must never be replaced by it.
            opts=pulumi.ResourceOptions(parent=self, depends_on=self.role_assignments,
                                        ignore_changes=["osProfile", "storageProfile.imageReference"]))
        self.client_id = self.identity.client_id
        self.register_outputs({"vmName": plan.vm_name, "clientId": self.identity.client_id})

    def grant_read(self, name: str, scope: pulumi.Input[str], subscription_id: pulumi.Input[str],
                   why: str) -> azure.authorization.RoleAssignment:
        """Monitoring Reader (`*/read`) at `scope`, outside the cluster's resource group: for what the program reads
        there on every run (a managed resource group Azure made for one of the stack's resources)."""
        return azure.authorization.RoleAssignment(
            f"{name}-read", principal_id=self.identity.principal_id, principal_type=PRINCIPAL_TYPE,
            role_definition_id=pulumi.Output.from_input(subscription_id).apply(
                lambda sub: role_definition_id(sub, MONITORING_READER)),
            scope=scope, description=f"gpucluster deployment runner: {why}"[:1024],
            opts=pulumi.ResourceOptions(parent=self))
