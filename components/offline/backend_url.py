"""The Pulumi backend a `pulumi login` on another machine must name to reach the same state as this one.

Chosen as the Pulumi CLI chooses it (pulumi/pulumi pkg/v3 `workspace/creds.go` GetCurrentCloudURLWithSource, read
at v3.274.0, the release nearest the pinned v3.272.0 that the Go module proxy serves): `PULUMI_BACKEND_URL`, else the
project's `Pulumi.yaml` `backend.url`, else the `current` key of the stored credentials (`credentials.json` in
`PULUMI_CREDENTIALS_PATH`, else `PULUMI_HOME`, else `~/.pulumi`: sdk/v3 v3.272.0 `go/common/workspace/creds.go`
getCredsFilePath). For Pulumi Cloud that is the API's URL (`https://api.pulumi.com`), which `pulumi login` takes, not
the `url` `pulumi whoami --json` reports: the backend's `URL()`, which for Pulumi Cloud is the console's
(`backend/httpstate/backend.go` `client.CloudConsoleURL`, v3.274.0), and which `pulumi login` refuses
(`cmd/pulumi/auth/login.go`, "is not a valid self-hosted backend"; the real CLI does, e2e/tests/test_pulumi_cli.py)."""

from __future__ import annotations

import json
import os
import sys
import urllib.parse
from collections.abc import Mapping
from pathlib import Path

import yaml


class BackendUnknownError(Exception):
    pass


def credentials_file(env: Mapping[str, str]) -> Path:
    folder = env.get("PULUMI_CREDENTIALS_PATH") or env.get("PULUMI_HOME") or str(Path.home() / ".pulumi")
    return Path(folder) / "credentials.json"


def with_storage_account(url: str, env: Mapping[str, str]) -> str:
    """An azblob:// backend as another machine can open it: the account in the URL (`storage_account`, the query
    parameter gocloud.dev's azureblob opener reads, or AZURE_STORAGE_ACCOUNT, which it reads from the environment:
    gocloud.dev blob/azureblob/azureblob.go at the version pulumi v3.274.0 requires). The runner has only the URL."""
    if not url.startswith("azblob://"):
        return url
    parts = urllib.parse.urlsplit(url)
    query = urllib.parse.parse_qs(parts.query)
    if query.get("storage_account"):
        return url
    account = env.get("AZURE_STORAGE_ACCOUNT")
    if not account:
        raise BackendUnknownError(f"{url} names no storage account, and AZURE_STORAGE_ACCOUNT is unset: the runner "
                                  "could not open it; log in with azblob://<container>?storage_account=<account>")
    extra = urllib.parse.urlencode({"storage_account": account})
    return urllib.parse.urlunsplit(parts._replace(query=f"{parts.query}&{extra}" if parts.query else extra))


def backend_url(env: Mapping[str, str], project: Path) -> str:
    """The backend URL; BackendUnknownError (with the fix) when this machine is logged in nowhere."""
    return with_storage_account(_chosen(env, project), env)


def _chosen(env: Mapping[str, str], project: Path) -> str:
    if env.get("PULUMI_BACKEND_URL"):
        return env["PULUMI_BACKEND_URL"]
    manifest = project / "Pulumi.yaml"
    if manifest.is_file():
        loaded = yaml.safe_load(manifest.read_text(encoding="utf-8")) or {}
        url = (loaded.get("backend") or {}).get("url") if isinstance(loaded, dict) else None
        if isinstance(url, str) and url:
            return url
    stored = credentials_file(env)
    try:
        current = json.loads(stored.read_text(encoding="utf-8")).get("current")
    except (OSError, ValueError, AttributeError):
        current = None
    if not isinstance(current, str) or not current:
        raise BackendUnknownError(f"no Pulumi backend: PULUMI_BACKEND_URL is unset, Pulumi.yaml names none and {stored} "
                                  "has no current login; run `pulumi login <backend URL>` first")
    return current


def main() -> int:
    try:
        print(backend_url(os.environ, Path.cwd()))
    except BackendUnknownError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0
