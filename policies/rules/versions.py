"""Version support: the cluster's Kubernetes minor is past its upstream end of life.

The plan tags the API-server scale set with the version and its minor's end-of-life date (from the
version table in components/catalog/versions.py), so this rule judges a preview without the library.
Mandatory by default; an organisation that accepts the risk lowers it in its pack config
(`"kubernetes-version-end-of-life": {"enforcementLevel": "advisory"}`).
"""

from __future__ import annotations

from datetime import date

from pulumi_policy import ReportViolation, Severity, StackValidationArgs

from .declare import Config, stack_rule
from .props import KUBERNETES_EOL_TAG, KUBERNETES_VERSION_TAG, ROLE_TAG, SCALE_SET, kind, tags

VERSION_TAG = KUBERNETES_VERSION_TAG
EOL_TAG = KUBERNETES_EOL_TAG
CONFIG = {
    "asOf": {"type": "string", "default": "", "pattern": r"^(\d{4}-\d{2}-\d{2})?$", "format": "date",
             "description": "judge as of this date (YYYY-MM-DD) instead of today, for reproducible reviews"},
    "minDaysLeft": {"type": "integer", "default": 0, "minimum": 0,
                    "description": "fail this many days before end of life as well"},
}


def _today(config: Config) -> date:
    return date.fromisoformat(str(config["asOf"])) if config["asOf"] else date.today()


@stack_rule(
    "kubernetes-version-end-of-life", severity=Severity.HIGH, config=CONFIG,
    description="The cluster's Kubernetes minor is within its upstream support (kubernetes.io/releases): past end "
                "of life it gets no security fixes.",
    remediation="Move cluster.kubernetesVersion to a supported minor (docs/versions.md, docs/operations.md minor "
                "upgrade), or lower this rule to advisory in the policy pack config.")
def kubernetes_end_of_life(args: StackValidationArgs, report: ReportViolation, config: Config) -> None:
    today = _today(config)
    for resource in args.resources:
        if kind(resource) != SCALE_SET:
            continue
        present = tags(resource.props)
        if present.get(ROLE_TAG) != "apiserver" or not present.get(EOL_TAG):
            continue
        end = date.fromisoformat(str(present[EOL_TAG]))
        left = (end - today).days
        if left < int(config["minDaysLeft"]):
            when = f"reached end of life on {end}" if left < 0 else f"reaches end of life on {end}, in {left} days"
            report(f"Kubernetes {present.get(VERSION_TAG)} {when} (as of {today})", resource.urn)


RULES = [kubernetes_end_of_life]
