"""Reads from the cluster as JSON, through the official client's ApiClient (its kubeconfig auth: certificates,
tokens, exec plugins) and its read-only guard. Lists are paged (`limit`/`continue`), as kubectl pages them."""

from __future__ import annotations

import json
from typing import Any

PAGE = 500
TIMEOUT = 60


class KubeError(Exception):
    """The API server answered a read with an error."""


class Kube:
    def __init__(self, api_client: Any) -> None:
        self._api = api_client

    @property
    def host(self) -> str:
        return str(self._api.configuration.host)

    @property
    def ca_file(self) -> str | None:
        return self._api.configuration.ssl_ca_cert

    @property
    def proxy(self) -> str | None:
        return self._api.configuration.proxy

    @property
    def api_client(self) -> Any:
        return self._api

    def get(self, path: str, query: list[tuple[str, Any]] | None = None) -> dict[str, Any] | None:
        """The object at `path`, or None when the API server says 404."""
        method, url, headers, body, post = self._api.param_serialize(
            "GET", path, query_params=query or [], header_params={"Accept": "application/json"},
            auth_settings=["BearerToken"])
        response = self._api.call_api(method, url, headers, body, post, _request_timeout=TIMEOUT)
        response.read()
        if response.status == 404:
            return None
        if response.status >= 400:
            raise KubeError(f"GET {path}: HTTP {response.status}: {_message(response.data)}")
        return json.loads(response.data)

    def text(self, path: str) -> str:
        """A plain-text read (a container's log); empty when the API server says 404."""
        method, url, headers, body, post = self._api.param_serialize(
            "GET", path, header_params={"Accept": "text/plain"}, auth_settings=["BearerToken"])
        response = self._api.call_api(method, url, headers, body, post, _request_timeout=TIMEOUT)
        response.read()
        if response.status == 404:
            return ""
        if response.status >= 400:
            raise KubeError(f"GET {path}: HTTP {response.status}: {_message(response.data)}")
        return response.data.decode(errors="replace")

    def list(self, path: str, query: list[tuple[str, Any]] | None = None) -> list[dict[str, Any]]:
        """Every item of a list, page by page; an API that is not served (a CRD not installed) lists nothing."""
        items: list[dict[str, Any]] = []
        token: str | None = None
        while True:
            page = self.get(path, [*(query or []), ("limit", PAGE), *([("continue", token)] if token else [])])
            if page is None:
                return items
            items += page.get("items") or []
            token = (page.get("metadata") or {}).get("continue")
            if not token:
                return items


def _message(data: bytes) -> str:
    try:
        return str(json.loads(data).get("message", ""))[:300]
    except (ValueError, AttributeError):
        return data[:300].decode(errors="replace")
