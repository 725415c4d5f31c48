"""Entry point the Pulumi CLI runs for `--policy-pack policies`. Constructing PolicyPack serves forever."""

from pulumi_policy import EnforcementLevel, PolicyPack
from rules import ALL_POLICIES  # type: ignore[import-not-found]  # run as a folder by the CLI

PolicyPack(name="gpucluster", enforcement_level=EnforcementLevel.MANDATORY, policies=ALL_POLICIES)
