"""Each node image version the plan boots, built in the cluster's gallery and replicated to its region.

Every scale set and VM boots `<gallery>/images/<definition>/versions/<version>` (components/azure/node_images.py),
so this reads Microsoft.Compute Gallery Image Versions - Get with `$expand=ReplicationStatus` for each version in
the plan (components/planning/node_images.py). A version that is missing, not `Succeeded`, or not replicated to the
stack's region stops every scale-out and reimage of the machines that boot it. ARM answers region names as display
names ("East US 2"; azure-rest-api-specs specification/compute/resource-manager/Microsoft.Compute/GalleryRP/stable/
2024-03-03/examples/galleryExamples/GalleryImageVersion_Get_WithReplicationStatus.json), the stack names it
`eastus2`: both are compared lower-cased without spaces.
"""

from __future__ import annotations

from typing import Any

from gpucluster.planning.cluster_plan import ClusterPlan
from gpucluster.planning.node_images import ImageVersionPlan, gallery_name
from gpucluster.verify.arm import Arm, not_found
from gpucluster.verify.results import Check, Result

IMAGES = Check("azure.images", "Microsoft.Compute Gallery Image Versions - Get, $expand=ReplicationStatus "
                               "(`az sig image-version show`); the plan's node images "
                               "(components/planning/node_images.py, docs/images.md)")


def region_key(name: str) -> str:
    return name.replace(" ", "").lower()


def _text(value: Any) -> str:
    """An SDK enum member (a str enum) as the REST value, other values as they are."""
    return str(getattr(value, "value", value))


def problems(live: Any, location: str) -> list[str]:
    """What keeps a version (azure-mgmt-compute's GalleryImageVersion) from booting machines in `location`."""
    found = []
    state = _text(live.provisioning_state)
    if state != "Succeeded":
        found.append(f"provisioningState {state} (needs Succeeded)")
    targets = [str(t.name) for t in getattr(live.publishing_profile, "target_regions", None) or []]
    if region_key(location) not in {region_key(t) for t in targets}:
        found.append(f"not replicated to {location} (target regions: {', '.join(targets) or 'none'})")
    for region in getattr(live.replication_status, "summary", None) or []:
        if region_key(str(region.region)) == region_key(location) and _text(region.state) != "Completed":
            found.append(f"replication to {location} {_text(region.state)} ({region.progress}%)")
    return found


def _verdict(arm: Arm, plan: ClusterPlan, version: ImageVersionPlan) -> Result:
    image, location, gallery = version.image, plan.spec.location, gallery_name(plan.spec.name)
    subject = f"{image} ({', '.join(version.machines)})"
    build = (f"build it: set cluster.images.{image.definition}.version to {image.version} and pulumi up "
             "(docs/images.md, 'Building an image')")
    try:
        live = arm.compute.gallery_image_versions.get(arm.resource_group, gallery, image.definition, image.version,
                                                      expand="ReplicationStatus")
    except not_found():
        return IMAGES.failed(subject, f"no version {image.version} of {image.definition} in gallery {gallery}", build)
    found = problems(live, location)
    if found:
        return IMAGES.failed(subject, "; ".join(found),
                             f"a failed build: docs/images.md, 'When a build fails', then {build}; a missing region: "
                             f"az sig image-version update -g {arm.resource_group} -r {gallery} -i {image.definition} "
                             f"-e {image.version} --target-regions {location}={version.replicas}; replication under "
                             "way: wait and verify again")
    return IMAGES.passed(subject, f"built, replicated to {location}")


def check_images(arm: Arm, plan: ClusterPlan) -> list[Result]:
    return [_verdict(arm, plan, version) for version in plan.images.versions]
