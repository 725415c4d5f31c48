"""The deployment runner's boot text: Ubuntu's packages step 2 needs (git, make, curl, python3's venv), then a script
that installs the pinned Pulumi CLI, its archive checked against the release's own checksum file, and the pinned Azure
CLI from PyPI in a venv of its own, and marks the runner ready (components/catalog/deploy_runner.py has the sources).

The checksum file comes from the same release as the archive: it catches a corrupt or substituted download on the
way, not a release replaced at its source (the digest itself is not pinned here: the release assets cannot be
fetched where the plan is made)."""

from __future__ import annotations

from gpucluster.bootstrap.cloud_config import dump_cloud_config
from gpucluster.catalog.deploy_runner import (
    AZURE_CLI_VERSION,
    PULUMI_ARCHIVE,
    PULUMI_ARCHIVE_URL,
    PULUMI_CHECKSUMS,
    PULUMI_CHECKSUMS_URL,
    READY_FILE,
    TOOLS,
)

SETUP_PATH = "/usr/local/sbin/gpucluster-runner-setup"
PACKAGES = ("ca-certificates", "curl", "git", "make", "python3-venv")
"""From Ubuntu 24.04's archive: curl fetches the CLI and waits for /readyz; git and make fetch and install the
project; python3-venv makes `.venv` (python3 itself is in the image)."""

SETUP_SCRIPT = f"""#!/bin/bash
# Installs what step 2 runs with, then marks the runner ready. Env (tests): TOOLS, READY_FILE.
set -euo pipefail
tools="${{TOOLS:-{TOOLS}}}"
ready="${{READY_FILE:-{READY_FILE}}}"
mkdir -p "$tools" "$(dirname "$ready")"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
curl --fail --silent --show-error --location --retry 5 --output "$work/{PULUMI_ARCHIVE}" "{PULUMI_ARCHIVE_URL}"
curl --fail --silent --show-error --location --retry 5 --output "$work/{PULUMI_CHECKSUMS}" "{PULUMI_CHECKSUMS_URL}"
# The release's checksum file has one `<sha256>  <name>` line per asset: check the archive's line, and only it.
line="^[0-9a-f]{{64}}  {PULUMI_ARCHIVE.replace(".", "[.]")}$"
grep --extended-regexp "$line" "$work/{PULUMI_CHECKSUMS}" > "$work/archive.sha256"
(cd "$work" && sha256sum --check --strict --status archive.sha256)
rm -rf "$tools/pulumi"
tar --extract --gzip --file "$work/{PULUMI_ARCHIVE}" --directory "$tools"
python3 -m venv "$tools/az"
"$tools/az/bin/pip" install --disable-pip-version-check --quiet "azure-cli=={AZURE_CLI_VERSION}"
"$tools/pulumi/pulumi" version
"$tools/az/bin/az" version --output none
touch "$ready"
"""


def render_runner_cloud_init() -> str:
    return dump_cloud_config({
        "package_update": True,
        "packages": list(PACKAGES),
        "write_files": [{"path": SETUP_PATH, "owner": "root:root", "permissions": "0755", "content": SETUP_SCRIPT}],
        "runcmd": [[SETUP_PATH]],
    })
