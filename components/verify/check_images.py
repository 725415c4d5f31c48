"""The pinned marketplace image versions the plan boots, offered in the region to this subscription.

Stacks declare marketplace images only (components/spec/pools.py ImageRef: publisher, offer, sku, version; no gallery
image ids), so this reads Microsoft.Compute Virtual Machine Images - Get for each. Azure keeps a marketplace version
only for a while (components/catalog/images.py): a version withdrawn after `pulumi up` stops every scale-out.
"""

from __future__ import annotations

from components.planning.cluster_plan import ClusterPlan
from components.verify import expected
from components.verify.arm import Arm, not_found
from components.verify.results import Check, Result

IMAGES = Check("azure.images", "Microsoft.Compute Virtual Machine Images - Get/List (`az vm image show --urn`); "
                               "the plan's images (components/catalog/images.py, pools[].image)")


def check_images(arm: Arm, plan: ClusterPlan) -> list[Result]:
    location = plan.spec.location
    results = []
    for urn, (image, users) in sorted(expected.images(plan).items()):
        subject = f"{urn} ({', '.join(users)})"
        listing = (f"az vm image list --location {location} --publisher {image.publisher} --offer {image.offer} "
                   f"--sku {image.sku} --all --output table")
        if image.version == "latest":
            versions = arm.compute.virtual_machine_images.list(location, image.publisher, image.offer, image.sku)
            if versions:
                results.append(IMAGES.passed(subject, f"{len(versions)} version(s) offered in {location}"))
            else:
                results.append(IMAGES.failed(subject, f"no version of {image.publisher}:{image.offer}:{image.sku} in "
                                                      f"{location}", f"pick an offered image ({listing})"))
            continue
        try:
            arm.compute.virtual_machine_images.get(location, image.publisher, image.offer, image.sku, image.version)
        except not_found():
            results.append(IMAGES.failed(subject, f"version {image.version} is not offered in {location}",
                                         "move the pin to an offered version in its own change, then reimage domain by "
                                         f"domain (docs/operations.md, 'Changes Azure refuses'); {listing}"))
            continue
        results.append(IMAGES.passed(subject, f"offered in {location}"))
    return results
