"""What Azure says each scale-set instance runs, and the two requests that move it (the rollout controller's ARM half,
rollout.py). Standard library only (with kube_client.py, shipped beside it in the agents image).

Read, per scale set (Microsoft.Compute at COMPUTE_API_VERSION):
- the model's image: GET virtualMachineScaleSets/{name}, `properties.virtualMachineProfile.storageProfile.
  imageReference.id` (the gallery image version Pulumi wrote);
- each instance: GET virtualMachineScaleSets/{name}/virtualMachines?$expand=instanceView, paged by `nextLink`:
  `instanceId`, `properties.latestModelApplied` (whether it runs the scale set's latest model), the image it runs
  (`properties.storageProfile.imageReference.id`), `properties.provisioningState` and its own instance view's
  `statuses` (a `ProvisioningState/...` code with its `time`).

Moved, only the instances that need it (`instanceIds`), under the node scale sets' Manual upgrade policy:
- `manualupgrade` brings an instance to the latest model. Where the model names another image version, that is
  what replaces its OS disk with the new image (MicrosoftDocs azure-docs virtual-machine-scale-sets-upgrade-scale-set.md,
  "How to bring VMs up-to-date with the latest scale set model" and "OS Updates"): the upgrade alone, one disk.
- `reimage` gives an instance a fresh OS disk of the image version it already runs (VirtualMachineScaleSetReimage
  Parameters: without `exactVersion` the disk is re-imaged to its existing version). A model change that keeps the
  image (the boot document in `osProfile.customData`) reaches a running instance only this way: "changes to the
  scale set OS ... profile ... only apply to VMs created after the change ... you must do a reimage" (same page).
  Such an instance is first brought to its model by `manualupgrade` (no new disk: the image is unchanged), then
  re-imaged: one disk.

A POST that must happen once is sent once per round: a 429 or a 409 (another operation on the scale set) never took
effect and is sent again after the wait ARM names; any other failure may have, so the caller reads the instances
before it asks again (rollout.py)."""

from __future__ import annotations

import json
import os
import time
import urllib.request
from dataclasses import dataclass
from datetime import datetime
from typing import Any

if __package__:
    from . import kube_client as kc
else:  # the agents image: the scripts side by side in /opt/gpucluster
    import kube_client as kc  # type: ignore[no-redef]

ARM = os.environ.get("ARM_ENDPOINT", "https://management.azure.com").rstrip("/")
IMDS_TOKEN = os.environ.get("IMDS_TOKEN_ENDPOINT", "http://169.254.169.254/metadata/identity/oauth2/token")
COMPUTE_API_VERSION = "2026-07-02"
"""What the scale-set provider sends (components/azure/scale_set/routes.py SCALE_SET_API_VERSION; a test keeps them equal)."""
ARM_RESOURCE = "https://management.azure.com/"
NOT_SENT = frozenset({409, 429})
"""Answers to a POST that say it was not taken: the scale set is busy with another operation, or the caller is
throttled. Sent again after Retry-After."""
MAX_PAGES = 200


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _seconds(stamp: Any) -> float | None:
    """An ARM time (`2026-11-29T08:01:34.1234567+00:00`) as epoch seconds; None when unreadable."""
    if not isinstance(stamp, str) or not stamp:
        return None
    text = stamp.replace("Z", "+00:00")
    if "." in text:  # ARM sends seven fractional digits; fromisoformat reads at most six
        head, _, rest = text.partition(".")
        digits = "".join(c for c in rest if c.isdigit())
        zone = rest[len(digits):]
        text = f"{head}.{digits[:6]}{zone}"
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        return None


@dataclass(frozen=True)
class Instance:
    """One scale-set VM as ARM reports it now."""

    id: str
    """Its `instanceId`, what the POSTs name."""
    node: str
    """Its computer name lower-cased: the Kubernetes node it registers as."""
    latest: bool
    """`latestModelApplied`."""
    image: str
    """The image it runs, lower-cased (Azure compares resource ids case-insensitively)."""
    state: str
    """`provisioningState`, lower-cased: succeeded, updating, failed, ..."""
    changed_at: float | None
    """When its last provisioning operation ended or began (its instance view's ProvisioningState status time)."""

    @property
    def failed(self) -> bool:
        return self.state == "failed"

    @property
    def busy(self) -> bool:
        return self.state not in ("succeeded", "failed")


def instance_of(vm: dict[str, Any]) -> Instance | None:
    """An Instance from one element of the list; None when it names no instance id (nothing to act on)."""
    props = _dict(vm.get("properties"))
    instance_id = vm.get("instanceId")
    if not isinstance(instance_id, str) or not instance_id:
        return None
    view = _dict(props.get("instanceView"))
    times = [_seconds(_dict(s).get("time")) for s in _list(view.get("statuses"))
             if str(_dict(s).get("code") or "").startswith("ProvisioningState/")]
    name = str(_dict(props.get("osProfile")).get("computerName") or view.get("computerName") or vm.get("name") or "")
    image = str(_dict(_dict(props.get("storageProfile")).get("imageReference")).get("id") or "")
    return Instance(id=instance_id, node=name.lower(), latest=props.get("latestModelApplied") is True,
                    image=image.lower(), state=str(props.get("provisioningState") or "").lower(),
                    changed_at=max((t for t in times if t is not None), default=None))


@dataclass
class Arm:
    """ARM with the controller's managed identity."""

    http: kc.Http
    client_id: str
    subscription: str
    resource_group: str
    clock: Any = time.time

    def __post_init__(self) -> None:
        self.tokens = kc.IdentityToken(self.http, lambda: IMDS_TOKEN, ARM_RESOURCE, self.client_id, self.clock)

    def _send(self, method: str, url: str, body: dict[str, Any] | None = None) -> Any:
        """One request to ARM (`url` an f-string on ARM, which components/catalog/arm_operations.py reads)."""
        return self._request(method, url, body)

    def _request(self, method: str, url: str, body: dict[str, Any] | None = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None

        def attempt() -> Any:
            request = urllib.request.Request(url, data=data, method=method,
                                             headers={"Authorization": f"Bearer {self.tokens.get()}",
                                                      "Content-Type": "application/json"})
            return self.http.send(request)

        if method == "GET":
            return self.http.retrying(attempt, tries=6)
        for n in range(1, 7):  # a POST again only on an answer that says it was not taken
            try:
                return attempt()
            except kc.ApiError as error:
                if error.status not in NOT_SENT or n == 6:
                    raise
                wait = error.retry_after if error.retry_after is not None else kc.backoff_seconds(
                    n, self.http.retry_base, self.http.retry_cap)
                self.http.sleep(min(wait, self.http.retry_cap))
        raise AssertionError("unreachable")

    def _names(self, scale_set: str) -> tuple[str, str, str]:
        return kc.segment(self.subscription), kc.segment(self.resource_group), kc.segment(scale_set)

    def model_image(self, scale_set: str) -> str | None:
        """The image version the scale set's model names, lower-cased; None when the scale set is gone (404)."""
        sub, rg, name = self._names(scale_set)
        try:
            found = self._send("GET", f"{ARM}/subscriptions/{sub}/resourceGroups/{rg}/providers/Microsoft.Compute/"
                                      f"virtualMachineScaleSets/{name}?api-version={COMPUTE_API_VERSION}")
        except kc.ApiError as error:
            if error.status == 404:
                return None
            raise
        profile = _dict(_dict(_dict(found).get("properties")).get("virtualMachineProfile"))
        return str(_dict(_dict(profile.get("storageProfile")).get("imageReference")).get("id") or "").lower()

    def instances(self, scale_set: str) -> list[Instance]:
        """Every instance with its own instance view, all pages; [] when the scale set is gone (404)."""
        sub, rg, name = self._names(scale_set)
        link: str | None = None
        found: list[Instance] = []
        for n in range(MAX_PAGES):
            if n and link is None:
                return found
            try:
                page = _dict(self._request("GET", link) if link else self._send(
                    "GET", f"{ARM}/subscriptions/{sub}/resourceGroups/{rg}/providers/Microsoft.Compute/"
                           f"virtualMachineScaleSets/{name}/virtualMachines?api-version={COMPUTE_API_VERSION}"
                           "&$expand=instanceView"))
            except kc.ApiError as error:
                if error.status == 404:
                    return []
                raise
            found.extend(i for i in (instance_of(_dict(v)) for v in _list(page.get("value"))) if i is not None)
            after = page.get("nextLink")  # followed only on ARM's own origin (the token goes with it)
            link = after if isinstance(after, str) and after and kc.origin(after) == kc.origin(ARM) else None
        raise kc.ApiError(0, f"{scale_set}: more than {MAX_PAGES} pages of instances")

    def upgrade(self, scale_set: str, ids: list[str]) -> None:
        """POST manualupgrade of these instances (VirtualMachineScaleSetVMInstanceRequiredIDs)."""
        sub, rg, name = self._names(scale_set)
        self._send("POST", f"{ARM}/subscriptions/{sub}/resourceGroups/{rg}/providers/Microsoft.Compute/"
                           f"virtualMachineScaleSets/{name}/manualupgrade?api-version={COMPUTE_API_VERSION}",
                   {"instanceIds": ids})

    def reimage(self, scale_set: str, ids: list[str]) -> None:
        """POST reimage of these instances (VirtualMachineScaleSetReimageParameters.instanceIds)."""
        sub, rg, name = self._names(scale_set)
        self._send("POST", f"{ARM}/subscriptions/{sub}/resourceGroups/{rg}/providers/Microsoft.Compute/"
                           f"virtualMachineScaleSets/{name}/reimage?api-version={COMPUTE_API_VERSION}",
                   {"instanceIds": ids})
