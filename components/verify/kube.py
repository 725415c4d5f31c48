"""Reads from the cluster as JSON, through the official client's ApiClient (its kubeconfig auth: certificates,
tokens, exec plugins) and its read-only guard. Lists are paged (`limit`/`continue`), as kubectl pages them, within
verify's bounds (components/verify/bounds.py)."""

from __future__ import annotations

import json
from typing import Any

from gpucluster.verify import bounds

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
        if response.status >= 300:  # a redirect is never followed (components/verify/bounds.py, hosts)
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
        if response.status >= 300:
            raise KubeError(f"GET {path}: HTTP {response.status}: {_message(response.data)}")
        return response.data.decode(errors="replace")

    def list(self, path: str, query: list[tuple[str, Any]] | None = None, optional: bool = False
             ) -> list[dict[str, Any]]:
        """Every item of a list, page by page. A 404 is an error (an API server that does not serve the core
        collections is not this cluster's, and "nothing found" would pass on nothing), unless `optional` (an API a
        CRD adds, which may not be installed: it lists nothing)."""
        def fetch(token: str | None) -> tuple[list[dict[str, Any]], str | None]:
            page = self.get(path, [*(query or []), ("limit", PAGE), *([("continue", token)] if token else [])])
            if page is None and not optional:
                raise KubeError(f"GET {path}: HTTP 404: the API server does not serve this list")
            if page is None:
                return [], None
            found = page.get("items") or []
            if not isinstance(found, list):
                raise KubeError(f"GET {path}: not a list")
            following = (page.get("metadata") or {}).get("continue")
            return found, str(following) if following else None

        return [item for page in bounds.pages(fetch, f"GET {path}") for item in page]


def _message(data: bytes) -> str:
    try:
        return str(json.loads(data).get("message", ""))[:300]
    except (ValueError, AttributeError):
        return data[:300].decode(errors="replace")
