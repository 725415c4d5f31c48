"""What the deployment runner installs and the rights its identity holds, each with where it was read
(docs/operations.md, "First bootstrap").

- The Pulumi CLI: the release of the Python SDK this project runs with (pulumi 3.272.0 in `.venv`); pulumi/pulumi
  releases the CLI and its SDKs from one tag. Asset names from `.goreleaser.yml` at pulumi/pulumi 1b5949891b3c
  (archives `{{ .ProjectName }}-{{ .Tag }}-{{ .Os }}-x64`, checksum `{{ .ProjectName }}-{{ .Version }}-checksums.txt`),
  their URL from `.github/scripts/generate-homebrew-tap` at the same commit
  (`https://github.com/pulumi/pulumi/releases/download/v${PULUMI_VERSION}/pulumi-v${PULUMI_VERSION}-${OS}-${ARCH}.tar.gz`).
  The checksum file's lines are `<sha256>  <name>` (goreleaser/goreleaser 025da554f0c5
  `internal/pipe/checksums/checksums.go`: `fmt.Sprintf("%v  %v\n", sha, a.Name)`, sha256 by default, which pulumi's
  `.goreleaser.yml` keeps): `sha256sum --check` reads that format.
- The Azure CLI: azure-cli from PyPI at a pinned version; the arguments the plan's commands use were read from that
  wheel (`components/catalog/facts/az_cli_args.json`, extracted by `tools/az_cli_args.py`).
- Roles: azure-docs `articles/role-based-access-control/built-in-roles/privileged.md` (commit 0b8729eaf7eb), the
  condition of `delegate-role-assignments-examples.md` ("Constrain roles and principal types", same commit) and the
  operators of `conditions-format.md` (commit 01b2a4c482bd: `ForAnyOfAllValues` holds when a value on the left
  satisfies the comparison to every value on the right).
"""

from __future__ import annotations

from gpucluster.spec import ImageRef

RUNNER_IMAGE = ImageRef(publisher="Canonical", offer="ubuntu-24_04-lts", sku="server", version="24.04.202609040")
"""Plain Ubuntu 24.04 (Gen2, x64): its python3 is 3.12, which `make install` takes (the project needs 3.11+; 22.04's
is 3.10). The version is one seen pinned in public deployment records of September 2026, not read from Canonical's
list: check it with `az vm image show --urn Canonical:ubuntu-24_04-lts:server:24.04.202609040` before the first up
(Canonical keeps about two years of versions, components/catalog/images.py)."""

TOOLS = "/opt/gpucluster"
"""Where the runner's boot puts the Pulumi CLI (`pulumi/`) and the Azure CLI's venv (`az/`)."""
READY_FILE = "/var/lib/gpucluster/runner-ready"
"""Written by the runner's boot once its tools are installed; step 2's script waits for nothing and refuses without it."""

PULUMI_CLI_VERSION = "3.272.0"
PULUMI_RELEASES = "https://github.com/pulumi/pulumi/releases/download"
PULUMI_ARCHIVE = f"pulumi-v{PULUMI_CLI_VERSION}-linux-x64.tar.gz"
PULUMI_CHECKSUMS = f"pulumi-{PULUMI_CLI_VERSION}-checksums.txt"
PULUMI_ARCHIVE_URL = f"{PULUMI_RELEASES}/v{PULUMI_CLI_VERSION}/{PULUMI_ARCHIVE}"
PULUMI_CHECKSUMS_URL = f"{PULUMI_RELEASES}/v{PULUMI_CLI_VERSION}/{PULUMI_CHECKSUMS}"

AZURE_CLI_VERSION = "2.91.0"
"""azure-cli on PyPI, installed into a venv of its own on the runner (its wheel is what `az_cli_args.json` was read
from)."""

CONTRIBUTOR = "b24988ac-6180-42a0-ab88-20f7382dd24c"
"""`*` but `Microsoft.Authorization/*/Write` and `*/Delete` (privileged.md): every resource, no role assignment."""
RBAC_ADMINISTRATOR = "f58310d9-a9f6-439a-9e8d-f62e7b41a168"
"""Role Based Access Control Administrator: `Microsoft.Authorization/roleAssignments/write` and `/delete` and `*/read`
only (privileged.md): the one built-in role that writes role assignments and nothing else, meant to be assigned with
a condition that constrains which roles it hands out (delegate-role-assignments-examples.md). User Access
Administrator holds `Microsoft.Authorization/*` (role definitions and policy too) and Owner `*`."""
OWNER = "8e3af657-a8ff-443c-a75c-2fe8c4bcb635"
USER_ACCESS_ADMINISTRATOR = "18d7d88d-d35e-4fb5-a5c3-7773c20a72d9"
PRIVILEGED_ROLES = (OWNER, USER_ACCESS_ADMINISTRATOR, RBAC_ADMINISTRATOR)
"""What the runner may never assign: the roles that hand out roles (or everything)."""

CONDITION_VERSION = "2.0"


def delegation_condition(excluded_roles: tuple[str, ...], principal_type: str) -> str:
    """A role-assignment condition in the form of delegate-role-assignments-examples.md ("Constrain roles and
    principal types"): writes and deletes only of roles outside `excluded_roles` (`ForAnyOfAllValues:GuidNotEquals`)
    and only for principals of `principal_type`."""
    roles = ", ".join(excluded_roles)

    def clause(action: str, source: str) -> str:
        return (f"((!(ActionMatches{{'Microsoft.Authorization/roleAssignments/{action}'}})) OR "
                f"(@{source}[Microsoft.Authorization/roleAssignments:RoleDefinitionId] "
                f"ForAnyOfAllValues:GuidNotEquals {{{roles}}} AND "
                f"@{source}[Microsoft.Authorization/roleAssignments:PrincipalType] "
                f"ForAnyOfAnyValues:StringEqualsIgnoreCase {{'{principal_type}'}}))")

    return f"{clause('write', 'Request')} AND {clause('delete', 'Resource')}"
