"""The Pulumi backend a `pulumi login` on another machine must name to reach the same state as this one.

Chosen as the Pulumi CLI chooses it (pulumi/pulumi pkg/v3 `workspace/creds.go` GetCurrentCloudURLWithSource, read
at v3.272.0): `PULUMI_BACKEND_URL`, else the project's `Pulumi.yaml` `backend.url`, else the `current` key of the
stored credentials (`credentials.json` in `PULUMI_CREDENTIALS_PATH`, else `PULUMI_HOME`, else `~/.pulumi`: sdk/v3
`go/common/workspace/creds.go` getCredsFilePath). For Pulumi Cloud that is the API's URL (`https://api.pulumi.com`),
which `pulumi login` takes, not the console URL `pulumi whoami --json` reports as `url` (httpstate backend `URL()`),
which `pulumi login` refuses."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path

import yaml


class BackendUnknownError(Exception):
    pass


def credentials_file(env: Mapping[str, str]) -> Path:
    folder = env.get("PULUMI_CREDENTIALS_PATH") or env.get("PULUMI_HOME") or str(Path.home() / ".pulumi")
    return Path(folder) / "credentials.json"


def backend_url(env: Mapping[str, str], project: Path) -> str:
    """The backend URL; BackendUnknownError (with the fix) when this machine is logged in nowhere."""
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
