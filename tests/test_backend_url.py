"""`gpucluster backend-url` (components/offline/backend_url.py): the backend a `pulumi login` on the runner takes, in
the Pulumi CLI's own order (make e2e runs it beside the real CLI: e2e/tests/test_pulumi_cli.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpucluster.offline.backend_url import BackendUnknownError, backend_url


def _home(tmp_path: Path, current: str) -> Path:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    (home / "credentials.json").write_text(json.dumps({"current": current, "accounts": {}}))
    return home


def test_pulumi_cloud_is_its_api_url_never_the_console(tmp_path: Path) -> None:
    home = _home(tmp_path, "https://api.pulumi.com")
    assert backend_url({"PULUMI_HOME": str(home)}, tmp_path) == "https://api.pulumi.com"


def test_an_azblob_backend_carries_its_storage_account(tmp_path: Path) -> None:
    home = _home(tmp_path, "azblob://state")
    env = {"PULUMI_HOME": str(home), "AZURE_STORAGE_ACCOUNT": "acct1"}
    assert backend_url(env, tmp_path) == "azblob://state?storage_account=acct1"
    home = _home(tmp_path, "azblob://state/prefix?storage_account=given")
    assert backend_url(env, tmp_path) == "azblob://state/prefix?storage_account=given"
    home = _home(tmp_path, "azblob://state")
    with pytest.raises(BackendUnknownError, match="storage_account=<account>"):
        backend_url({"PULUMI_HOME": str(home)}, tmp_path)


def test_the_credentials_path_variable_wins_over_pulumi_home(tmp_path: Path) -> None:
    creds = tmp_path / "creds"
    creds.mkdir()
    (creds / "credentials.json").write_text(json.dumps({"current": "file:///a"}))
    home = _home(tmp_path, "file:///b")
    assert backend_url({"PULUMI_CREDENTIALS_PATH": str(creds), "PULUMI_HOME": str(home)}, tmp_path) == "file:///a"


@pytest.mark.parametrize("stored", ["", "not json", json.dumps({"current": ""}), json.dumps([1])])
def test_no_login_is_one_error_naming_the_fix(tmp_path: Path, stored: str) -> None:
    home = tmp_path / "home"
    home.mkdir()
    if stored:
        (home / "credentials.json").write_text(stored)
    with pytest.raises(BackendUnknownError, match="pulumi login"):
        backend_url({"PULUMI_HOME": str(home)}, tmp_path)
