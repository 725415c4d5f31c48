"""NodeImages: the cluster's Azure Compute Gallery, one image definition per machine role, and an Azure VM Image
Builder template per version this stack builds, run on creation (`autoRun`), distributing the version to the
gallery in the cluster's region. Scale sets and VMs boot `<gallery>/images/<definition>/versions/<version>`.

Sources: azure-compute-docs articles/virtual-machines/linux/image-builder-json.md ("Distribute: sharedImage":
explicit versioning with `.../images/<definition>/versions/<version>`, "The image version ID needs to be distinct
... from any image versions that are in the existing Azure Compute Gallery"; "targetRegions"); image-builder-overview.md
(deleting a template leaves what it distributed); image-builder-permissions-cli.md (the identity's actions below).
Image Builder returns from creating the template before the build ends, so a local command waits for the version
before any machine boots it (docs/images.md, "Building an image").

The versions are Image Builder's writes, not Pulumi resources, and Azure refuses to delete an image definition that
still has versions (jenkins-infra/azure#1544, Azure/azure-sdk-for-python#25506). So each definition has one
`<name>-<definition>-versions` command whose delete removes every version under it: everything that boots or builds
a version depends on it and the definition is its dependency, so `pulumi destroy` (or dropping a definition) deletes
the machines and templates, then the versions, then the definition. The gallery itself is `protect`ed
(docs/operations.md, "Tearing a cluster down").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pulumi
import pulumi_azure_native as azure
import pulumi_command as command

from gpucluster.azure.scope import AzureScope
from gpucluster.bake.bundle import bake_bundle
from gpucluster.catalog.azure_roles import role_definition_id
from gpucluster.catalog.node_images import GALLERY_OFFER, GALLERY_PUBLISHER, NODE_IMAGES
from gpucluster.catalog.registries import parse_image
from gpucluster.planning import azure_names as names
from gpucluster.planning.cluster_plan import ClusterPlan
from gpucluster.planning.node_images import ImageVersionPlan, NodeImage, gallery_name, version_id

IMAGE_BUILDER_ACTIONS = (
    "Microsoft.Compute/galleries/read",
    "Microsoft.Compute/galleries/images/read",
    "Microsoft.Compute/galleries/images/versions/read",
    "Microsoft.Compute/galleries/images/versions/write",
    "Microsoft.Compute/images/write",
    "Microsoft.Compute/images/read",
    "Microsoft.Compute/images/delete",
)
"""The custom role Image Builder's identity needs to distribute to a gallery (image-builder-permissions-cli.md,
"Azure Image Builder Service Image Creation Role"; the same actions in Azure/azvmimagebuilder
solutions/12_Creating_AIB_Security_Roles/aibRoleImageCreation.json)."""
BUILD_TIMEOUT_MINUTES = 240
BUNDLE_TAG = "gpucluster-bake-sha256"
WAIT_SCRIPT = r"""#!/usr/bin/env bash
# Waits until Image Builder has distributed the version (provisioningState Succeeded); fails on Failed.
# Env: RESOURCE_GROUP, GALLERY, DEFINITION, VERSION, TIMEOUT (seconds). Needs the Azure CLI, logged in.
set -euo pipefail
deadline=$((SECONDS + TIMEOUT))
while true; do
  state=$(az sig image-version show --resource-group "$RESOURCE_GROUP" --gallery-name "$GALLERY" \
    --gallery-image-definition "$DEFINITION" --gallery-image-version "$VERSION" \
    --query provisioningState --output tsv 2>/dev/null || true)
  case "$state" in
    Succeeded) echo "image $DEFINITION $VERSION is built"; exit 0 ;;
    Failed) echo "Image Builder failed to build $DEFINITION $VERSION: see docs/images.md, \"When a build fails\"" >&2; exit 1 ;;
  esac
  if [ "$SECONDS" -ge "$deadline" ]; then
    echo "image $DEFINITION $VERSION not built after ${TIMEOUT}s" >&2
    exit 1
  fi
  sleep 60
done
"""


VERSIONS_DELETE_SCRIPT = r"""#!/usr/bin/env bash
# Deletes every image version under one gallery image definition (Image Builder's writes), so the definition can go.
# Env: RESOURCE_GROUP, GALLERY, DEFINITION. Needs the Azure CLI, logged in. A definition already gone is done.
set -euo pipefail
if ! versions=$(az sig image-version list --resource-group "$RESOURCE_GROUP" --gallery-name "$GALLERY" \
    --gallery-image-definition "$DEFINITION" --query "[].name" --output tsv 2>&1); then
  case "$versions" in
    *ResourceNotFound*) echo "$DEFINITION is gone"; exit 0 ;;
  esac
  echo "$versions" >&2
  exit 1
fi
for version in $versions; do
  echo "deleting image $DEFINITION $version"
  az sig image-version delete --resource-group "$RESOURCE_GROUP" --gallery-name "$GALLERY" \
    --gallery-image-definition "$DEFINITION" --gallery-image-version "$version"
done
"""
VERSIONS_CREATE_SCRIPT = 'echo "the versions of image $DEFINITION are deleted with it"'


def served_name(plan: ClusterPlan) -> Callable[[str], str]:
    """The name the cluster's pods use for an upstream image (its registry's cache rule); an upstream the registry has
    no rule for (the in-cluster layer off: nothing runs it) keeps its own name."""
    hosts = {u.host for u in plan.registry.upstreams}
    return lambda image: plan.registry.serve(image) if parse_image(image).host in hosts else image


def template_name(cluster: str, image: NodeImage) -> str:
    return f"{cluster}-{image.definition}-{image.version.replace('.', '-')}"


@dataclass(frozen=True)
class ImageIds:
    ids: dict[NodeImage, pulumi.Output[str]]

    def of(self, image: NodeImage) -> pulumi.Output[str]:
        return self.ids[image]


@dataclass(frozen=True)
class NodeImagesArgs:
    """The inputs of NodeImages."""

    scope: AzureScope
    """Where the gallery, its image definitions and the builder identity go."""
    plan: ClusterPlan
    """The images to define and the versions to build (`plan.images`)."""


class NodeImages(pulumi.ComponentResource):
    """The cluster's Compute Gallery, one image definition per machine role, and the versions this stack builds."""

    gallery: azure.compute.Gallery
    """The gallery (protected: its versions outlive a template)."""
    ids: ImageIds
    """The gallery image version id each node image boots from, once it is built."""

    def __init__(self, name: str, args: NodeImagesArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpucluster:azure:NodeImages", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        plan, where = args.plan, args.scope
        cluster, resource_group_name, location, tags = where.cluster, where.resource_group_name, where.location, \
            dict(where.tags)
        subscription_id = pulumi.Output.from_input(where.subscription_id)
        self.gallery = azure.compute.Gallery(
            f"{name}-gallery", gallery_name=gallery_name(cluster), resource_group_name=resource_group_name,
            location=location, description=f"Node images of cluster {cluster} (docs/images.md)", tags=tags,
            opts=pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(protect=True)))
        self.definitions: dict[str, azure.compute.GalleryImage] = {}
        self.versions: dict[str, command.local.Command] = {}
        for definition in plan.images.builds:
            image = NODE_IMAGES[definition]
            self.definitions[definition] = azure.compute.GalleryImage(
                f"{name}-{definition}", gallery_image_name=definition, gallery_name=self.gallery.name,
                resource_group_name=resource_group_name, location=location, description=image.description,
                identifier=azure.compute.GalleryImageIdentifierArgs(publisher=GALLERY_PUBLISHER, offer=GALLERY_OFFER,
                                                                    sku=definition),
                os_type=azure.compute.OperatingSystemTypes.LINUX,
                os_state=azure.compute.OperatingSystemStateTypes.GENERALIZED,
                hyper_v_generation=azure.compute.HyperVGeneration.V2, architecture=image.architecture,
                features=[azure.compute.GalleryImageFeatureArgs(name="SecurityType", value=image.security_type)],
                # No tags: image definitions do not take them (azure-docs tag-resources.md, Microsoft.Compute).
                opts=child)
            self.versions[definition] = command.local.Command(
                f"{name}-{definition}-versions", create=VERSIONS_CREATE_SCRIPT, delete=VERSIONS_DELETE_SCRIPT,
                interpreter=["/bin/bash", "-c"],
                environment=pulumi.Output.all(resource_group_name, self.gallery.name).apply(lambda args, d=definition: {
                    "RESOURCE_GROUP": args[0], "GALLERY": args[1], "DEFINITION": d}),
                opts=pulumi.ResourceOptions(parent=self, depends_on=[self.definitions[definition]]))
        self.identity = azure.managedidentity.UserAssignedIdentity(
            f"{name}-builder", resource_group_name=resource_group_name, location=location, tags=tags, opts=child)
        scope = pulumi.Output.concat("/subscriptions/", subscription_id, "/resourceGroups/", resource_group_name)
        rg_name = names.resource_group_name(cluster)
        role_guid = subscription_id.apply(lambda sub: names.deterministic_guid(sub, rg_name, "image-builder"))
        role = azure.authorization.RoleDefinition(
            f"{name}-builder-role", scope=scope, role_definition_id=role_guid,
            role_name=subscription_id.apply(
                lambda sub: f"gpucluster-{cluster}-image-builder-{names.stack_hash(sub, rg_name)}"),
            description=f"What Azure VM Image Builder needs to distribute cluster {cluster}'s node images",
            role_type="CustomRole", permissions=[azure.authorization.PermissionArgs(actions=list(IMAGE_BUILDER_ACTIONS))],
            assignable_scopes=[scope], opts=child)
        assignment = azure.authorization.RoleAssignment(
            f"{name}-builder-role-assignment", principal_id=self.identity.principal_id, principal_type="ServicePrincipal",
            role_definition_id=pulumi.Output.all(subscription_id, role_guid).apply(
                lambda ids: role_definition_id(ids[0], ids[1])),
            scope=scope, opts=pulumi.ResourceOptions(parent=self, depends_on=[role]))
        ids: dict[NodeImage, pulumi.Output[str]] = {}
        for version in plan.images.versions:
            image = version.image
            plain = pulumi.Output.all(subscription_id, resource_group_name).apply(
                lambda args, image=image: version_id(args[0], args[1], cluster, image))
            if not version.built_here:
                # Built by an earlier template; the gallery keeps it (docs/images.md, "Rolling out a new version").
                ids[image] = pulumi.Output.all(plain, self.versions[image.definition].id).apply(lambda a: a[0])
                continue
            ready = self._build(name, plan, version, resource_group_name, location, tags, plain,
                                [assignment, self.versions[image.definition]])
            ids[image] = pulumi.Output.all(plain, ready.id).apply(lambda a: a[0])
        self.ids = ImageIds(ids)
        self.register_outputs({"gallery": self.gallery.name, "imageIds": {str(i): v for i, v in ids.items()}})

    def _build(self, name: str, plan: ClusterPlan, version: ImageVersionPlan, resource_group_name: pulumi.Input[str],
               location: str, tags: dict[str, str], version_resource_id: pulumi.Output[str],
               depends_on: list[pulumi.Resource]) -> command.local.Command:
        image = version.image
        definition = NODE_IMAGES[image.definition]
        bundle = bake_bundle(image.definition, image.version, plan.spec.kubernetes_version, served_name(plan))
        source = definition.source
        template = azure.virtualmachineimages.VirtualMachineImageTemplate(
            f"{name}-{image.definition}-template", image_template_name=template_name(plan.spec.name, image),
            resource_group_name=resource_group_name, location=location,
            identity=azure.virtualmachineimages.ImageTemplateIdentityArgs(
                type=azure.virtualmachineimages.ResourceIdentityType.USER_ASSIGNED,
                user_assigned_identities=[self.identity.id]),
            source=azure.virtualmachineimages.ImageTemplatePlatformImageSourceArgs(
                type="PlatformImage", publisher=source.publisher, offer=source.offer, sku=source.sku,
                version=source.version),
            customize=[azure.virtualmachineimages.ImageTemplateShellCustomizerArgs(
                type="Shell", name=f"bake-{image.definition}", inline=bundle.inline_commands())],
            distribute=[azure.virtualmachineimages.ImageTemplateSharedImageDistributorArgs(
                type="SharedImage", gallery_image_id=version_resource_id,
                run_output_name=f"{image.definition}-{image.version}",
                target_regions=[azure.virtualmachineimages.TargetRegionArgs(
                    name=location, replica_count=version.replicas, storage_account_type="Standard_ZRS")])],
            vm_profile=azure.virtualmachineimages.ImageTemplateVmProfileArgs(vm_size=definition.build_vm_size),
            build_timeout_in_minutes=BUILD_TIMEOUT_MINUTES,
            auto_run=azure.virtualmachineimages.ImageTemplateAutoRunArgs(
                state=azure.virtualmachineimages.AutoRunState.AUTO_RUN_ENABLED),
            tags={**tags, BUNDLE_TAG: bundle.sha256},
            # The replica count is planned from the VMs that boot the version at its build; later pool sizes must not
            # touch a built template. Raise replicas of a built version with `az sig image-version update` (docs/images.md).
            opts=pulumi.ResourceOptions(parent=self, depends_on=depends_on,
                                        ignore_changes=["distribute[0].targetRegions[0].replicaCount"]))
        return command.local.Command(
            f"{name}-{image.definition}-built", create=WAIT_SCRIPT, interpreter=["/bin/bash", "-c"],
            environment=pulumi.Output.all(resource_group_name, self.gallery.name).apply(lambda args: {
                "RESOURCE_GROUP": args[0], "GALLERY": args[1], "DEFINITION": image.definition,
                "VERSION": image.version, "TIMEOUT": str(BUILD_TIMEOUT_MINUTES * 60 + 3600)}),
            triggers=[template.id], opts=pulumi.ResourceOptions(parent=self, depends_on=[template]))
