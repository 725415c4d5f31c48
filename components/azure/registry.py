"""The cluster's Azure Container Registry: Premium, zone-redundant, reachable only through a private endpoint in
the VNet, with one artifact-cache rule per upstream (components/planning/registry.py), a pull identity the nodes
use, and the project's agents image built into it. docs/registry.md has the sources.

- Premium: private endpoints and zone redundancy are Premium features (container-registry-skus.md,
  container-registry-private-endpoints.md, zone-redundancy.md).
- publicNetworkAccess Disabled, a private endpoint (group `registry`) with the `privatelink.azurecr.io` zone
  linked to the VNet; the dedicated data endpoint (`<name>.<region>.data.azurecr.io`) is on, as private endpoints
  need it (container-registry-private-endpoints.md: "Dedicated data endpoints are automatically enabled when you
  configure a private endpoint"; it is declared rather than left to Azure, so a diff never shows it flip).
- Trusted services bypass (`AzureServices`, the default) stays on for `az acr import`
  (allow-access-trusted-services.md); anonymous pull and the admin user stay off.
- The agents image is built by ACR Tasks on a dedicated agent pool in the control-plane subnet
  (components/catalog/acr_tasks.py): `az acr run` uploads the build context and schedules the run through ARM, and
  the pool, inside the VNet, pulls the served base and pushes through the private endpoint. Where `pulumi up` runs
  needs the Azure CLI and ARM only: no Docker, no route to the registry's private address.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_azure_native as azure
import pulumi_command as command

from gpucluster.azure.network import NetworkRefs
from gpucluster.azure.scope import AzureScope
from gpucluster.catalog.acr_tasks import AGENT_POOL_COUNT, AGENT_POOL_NAME, AGENT_POOL_TIER
from gpucluster.catalog.azure_roles import ACR_PULL, KEY_VAULT_SECRETS_USER, role_definition_id
from gpucluster.planning import agents_image
from gpucluster.planning.ip_plan import CONTROL_PLANE_BLOCK
from gpucluster.planning.registry import DOCKER_HUB_CREDENTIALS, RegistryPlan
from gpucluster.spec.consumer_rules import REGISTRY_DNS_ZONE
from gpucluster.spec.registry import DockerHubCredentials

PRIVATE_DNS_ZONE = REGISTRY_DNS_ZONE
PRIVATE_LINK_GROUP = "registry"


@dataclass(frozen=True)
class RegistryAccess:
    """What a machine needs to pull from the registry: the pull identity (attached to its scale set) and the tenant."""

    identity_id: pulumi.Output[str]
    client_id: pulumi.Output[str]
    tenant_id: pulumi.Output[str]


def secret_uri(vault: str, secret: str) -> str:
    return f"https://{vault}.vault.azure.net/secrets/{secret}"


BUILD_SCRIPT = r"""#!/usr/bin/env bash
# Builds the agents image server-side: ACR Tasks on the registry's agent pool in the VNet (no Docker here).
# Env: REGISTRY_NAME, AGENT_POOL, CONTEXT_ARCHIVE (the Dockerfile and its scripts, a base64 tar.gz), TASK (the
# multi-step task YAML). Needs the Azure CLI, logged in with rights to schedule runs on the registry (ARM only).
set -euo pipefail
source_dir=$(mktemp -d)
trap 'rm -rf "$source_dir"' EXIT
printf '%s' "$CONTEXT_ARCHIVE" | base64 -d | tar -xzf - -C "$source_dir"
printf '%s' "$TASK" > "$source_dir/acr-task.yaml"
az acr run --registry "$REGISTRY_NAME" --agent-pool "$AGENT_POOL" --platform linux --file acr-task.yaml \
  "$source_dir"
"""


@dataclass(frozen=True)
class ContainerRegistryArgs:
    """The inputs of ContainerRegistry."""

    scope: AzureScope
    """Where the registry, its private DNS zone, endpoint, pull identity and agent pool go."""
    plan: RegistryPlan
    """The registry's name, cache rules and the agents image to build (`plan.registry`)."""
    network: NetworkRefs
    """The VNet the private DNS zone links to; the control-plane subnet holds the endpoint and the agent pool."""
    docker_hub: DockerHubCredentials | None = None
    """The Key Vault secrets of a Docker Hub login for the cache rules that need one (`registry.dockerHub`); None:
    no credential set (anonymous pulls through the cache)."""
    dns_zone_id: str | None = None
    """An existing `privatelink.azurecr.io` zone already linked to the VNet (`network.existingVnet.registryDnsZoneId`):
    the endpoint's records go there; None: the registry gets a zone of its own, linked to the VNet."""


class ContainerRegistry(pulumi.ComponentResource):
    """The cluster's private Azure Container Registry: every image a machine or pod pulls comes from it."""

    registry: azure.containerregistry.Registry
    """The registry (protected; Premium, zone-redundant, no public access)."""
    access: RegistryAccess
    """The pull identity every machine carries, and its tenant."""
    agents_image: command.local.Command
    """The build of the project's agents image (ACR Tasks in the VNet); the in-cluster layer waits for it."""

    def __init__(self, name: str, args: ContainerRegistryArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpucluster:azure:ContainerRegistry", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        plan, network, scope, tags = args.plan, args.network, args.scope, dict(args.scope.tags)
        rg = scope.resource_group_name
        subscription_id = pulumi.Output.from_input(scope.subscription_id)
        self.registry = azure.containerregistry.Registry(
            name, registry_name=plan.name, resource_group_name=rg, location=scope.location,
            sku=azure.containerregistry.SkuArgs(name="Premium"), zone_redundancy="Enabled",
            public_network_access="Disabled", network_rule_bypass_options="AzureServices",
            data_endpoint_enabled=True, admin_user_enabled=False, anonymous_pull_enabled=False, tags=tags,
            opts=pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(protect=True)))
        registry_id = self.registry.id
        waits: list[pulumi.Resource] = []
        if args.dns_zone_id is None:
            zone = azure.privatedns.PrivateZone(f"{name}-dns", private_zone_name=PRIVATE_DNS_ZONE,
                                                resource_group_name=rg, location="global", tags=tags, opts=child)
            self.dns_link = azure.privatedns.VirtualNetworkLink(
                f"{name}-dns-link", private_zone_name=zone.name, resource_group_name=rg, location="global",
                virtual_network=azure.privatedns.SubResourceArgs(id=network.vnet_id), registration_enabled=False,
                tags=tags, opts=child)
            zone_id: pulumi.Input[str] = zone.id
            waits.append(self.dns_link)
        else:
            zone_id = args.dns_zone_id
        endpoint = azure.network.PrivateEndpoint(
            f"{name}-endpoint", resource_group_name=rg, location=scope.location,
            subnet=azure.network.SubnetArgs(id=network.subnet_ids[CONTROL_PLANE_BLOCK]),
            private_link_service_connections=[azure.network.PrivateLinkServiceConnectionArgs(
                name=f"{name}-registry", private_link_service_id=registry_id, group_ids=[PRIVATE_LINK_GROUP])],
            tags=tags, opts=child)
        # The zone group writes the registry's and the data endpoint's A records into the zone.
        self.dns_records = azure.network.PrivateDnsZoneGroup(
            f"{name}-dns-records", private_endpoint_name=endpoint.name, resource_group_name=rg,
            private_dns_zone_group_name="default",
            private_dns_zone_configs=[azure.network.PrivateDnsZoneConfigArgs(name="acr", private_dns_zone_id=zone_id)],
            opts=child)
        # Nodes and API servers pull with this identity (kubelet's acr-credential-provider): AcrPull only.
        self.pull_identity = azure.managedidentity.UserAssignedIdentity(
            f"{name}-pull", resource_group_name=rg, location=scope.location, tags=tags, opts=child)
        azure.authorization.RoleAssignment(
            f"{name}-pull-role", principal_id=self.pull_identity.principal_id, principal_type="ServicePrincipal",
            role_definition_id=subscription_id.apply(lambda sub: role_definition_id(sub, ACR_PULL)),
            scope=registry_id, opts=child)
        credential_set_id: pulumi.Output[str] | None = None
        waits.insert(0, self.dns_records)
        docker_hub = args.docker_hub
        if any(rule.credential_set for rule in plan.cache_rules) and docker_hub is not None:
            credentials = azure.containerregistry.CredentialSet(
                f"{name}-{DOCKER_HUB_CREDENTIALS}", credential_set_name=DOCKER_HUB_CREDENTIALS,
                registry_name=self.registry.name, resource_group_name=rg, login_server="docker.io",
                identity=azure.containerregistry.IdentityPropertiesArgs(
                    type=azure.containerregistry.ResourceIdentityType.SYSTEM_ASSIGNED),
                auth_credentials=[azure.containerregistry.AuthCredentialArgs(
                    name="Credential1",
                    username_secret_identifier=secret_uri(docker_hub.vault_name, docker_hub.username_secret),
                    password_secret_identifier=secret_uri(docker_hub.vault_name, docker_hub.password_secret))],
                opts=child)
            # The credential set reads the secrets with its own identity (artifact-cache-cli.md, "Assign
            # permissions to Key Vault": Key Vault Secrets User on an RBAC vault).
            secrets_reader = azure.authorization.RoleAssignment(
                f"{name}-{DOCKER_HUB_CREDENTIALS}-secrets", principal_type="ServicePrincipal",
                principal_id=credentials.identity.apply(lambda i: i.principal_id if i and i.principal_id else ""),
                role_definition_id=subscription_id.apply(
                    lambda sub: role_definition_id(sub, KEY_VAULT_SECRETS_USER)),
                scope=docker_hub.key_vault_id, opts=child)
            credential_set_id = credentials.id
            waits.append(secrets_reader)
        self.cache_rules = [
            azure.containerregistry.CacheRule(
                f"{name}-{rule.name}", cache_rule_name=rule.name, registry_name=self.registry.name,
                resource_group_name=rg, source_repository=rule.source_repository,
                target_repository=rule.target_repository,
                credential_set_resource_id=credential_set_id if rule.credential_set else None, opts=child)
            for rule in plan.cache_rules]
        # Build agents in the VNet: the registry is private, so the build runs where its endpoint is reachable.
        self.agent_pool = azure.containerregistry.AgentPool(
            f"{name}-{AGENT_POOL_NAME}", agent_pool_name=AGENT_POOL_NAME, registry_name=self.registry.name,
            resource_group_name=rg, location=scope.location, os=azure.containerregistry.OS.LINUX,
            tier=AGENT_POOL_TIER, count=AGENT_POOL_COUNT,
            virtual_network_subnet_resource_id=network.subnet_ids[CONTROL_PLANE_BLOCK], tags=tags,
            opts=pulumi.ResourceOptions(parent=self, depends_on=waits))
        self.agents_image = command.local.Command(
            f"{name}-agents-image", create=BUILD_SCRIPT, interpreter=["/bin/bash", "-c"],
            triggers=[plan.agents_image, *plan.agents_platforms],
            environment={"REGISTRY_NAME": plan.name, "AGENT_POOL": AGENT_POOL_NAME,
                         "CONTEXT_ARCHIVE": agents_image.context_archive(),
                         "TASK": agents_image.task_yaml(agents_image.REPOSITORY, plan.agents_tag,
                                                        plan.agents_base_image, plan.agents_platforms)},
            opts=pulumi.ResourceOptions(parent=self, depends_on=[*self.cache_rules, self.agent_pool]))
        self.access = RegistryAccess(self.pull_identity.id, self.pull_identity.client_id,
                                     pulumi.Output.from_input(scope.tenant_id))
        self.register_outputs({"registryId": self.registry.id, "loginServer": self.registry.login_server,
                               "pullIdentityId": self.access.identity_id})
