"""Push an etcd member's certificates, the etcd CA key and the renewal timer to the running VM.

Members created from the current boot document renew their own certificates (components/bootstrap/
cert_renewal.py, docs/pki.md). An etcd member's customData is applied only when its VM is created, and members
keep their data, so they are not reimaged: a member created before the renewal timer existed gets it, once,
from this script. It reads a stack export and prints a script that installs one member's current
certificates, the etcd CA key and the timer, and restarts etcd:

    pulumi stack export --show-secrets > export.json      # keep it secret; delete it afterwards
    .venv/bin/python -m tools.etcd_certs export.json etcd-0 > etcd-0.sh
    az vm run-command invoke -g <rg> -n etcd-0 --command-id RunShellScript --scripts @etcd-0.sh

One member at a time: the script waits until the member is healthy again and fails otherwise.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from gpucluster.bootstrap.cert_renewal import RENEW_SCRIPT, SERVICE, TIMER, etcd_renew_script, renewal_units
from gpucluster.bootstrap.etcd import CLIENT_PORT, PKI_DIR, etcdctl_command
from gpucluster.planning.pki import ETCD_CA, etcd_member_certificates

CERT_TYPES = ("tls:index/locallySignedCert:LocallySignedCert", "tls:index/selfSignedCert:SelfSignedCert")
KEY_TYPE = "tls:index/privateKey:PrivateKey"
SECRET_SIG = "1b47061264138c4ac30d75fd1eb44270"


class ExportError(Exception):
    pass


def _plain(value: Any) -> str:
    """A `pulumi stack export --show-secrets` value: a string, or a secret envelope with its JSON plaintext."""
    if isinstance(value, dict) and SECRET_SIG in value.values():
        if "plaintext" not in value:
            raise ExportError("the export hides secrets: run `pulumi stack export --show-secrets`")
        value = json.loads(value["plaintext"])
    if not isinstance(value, str):
        raise ExportError(f"expected a PEM string, found {type(value).__name__}")
    return value


def _find(resources: list[dict[str, Any]], types: tuple[str, ...], suffix: str, field: str) -> str:
    found = [r for r in resources if r.get("type") in types and str(r.get("urn", "")).rsplit("::", 1)[-1].endswith(suffix)]
    if len(found) != 1:
        raise ExportError(f"expected one {types[0].rsplit(':', 1)[-1]} named *{suffix}, found {len(found)}")
    return _plain((found[0].get("outputs") or {}).get(field))


def member_files(export: dict[str, Any], member: str) -> dict[str, tuple[str, str]]:
    """Path on the member -> (mode, PEM), as its cloud-init wrote them (components/bootstrap/etcd.py)."""
    resources = export.get("deployment", {}).get("resources", [])
    files = {f"{PKI_DIR}/ca.crt": ("0644", _find(resources, CERT_TYPES, f"-{ETCD_CA}", "certPem")),
             f"{PKI_DIR}/ca.key": ("0600", _find(resources, (KEY_TYPE,), f"-{ETCD_CA}-key", "privateKeyPem"))}
    for role, cert in etcd_member_certificates(member).items():
        files[f"{PKI_DIR}/{role}.crt"] = ("0644", _find(resources, CERT_TYPES, f"-{cert}", "certPem"))
        files[f"{PKI_DIR}/{role}.key"] = ("0600", _find(resources, (KEY_TYPE,), f"-{cert}-key", "privateKeyPem"))
    service, timer = renewal_units()
    files[RENEW_SCRIPT] = ("0755", etcd_renew_script())
    files[f"/etc/systemd/system/{SERVICE}"] = ("0644", service)
    files[f"/etc/systemd/system/{TIMER}"] = ("0644", timer)
    return files


def render_script(files: dict[str, tuple[str, str]]) -> str:
    lines = ["#!/bin/bash", "set -euo pipefail"]
    for path, (mode, pem) in sorted(files.items()):
        if "GPUCLUSTER_PEM" in pem:
            raise ExportError(f"{path}: unexpected content")
        lines += [f"cat > {path}.new <<'GPUCLUSTER_PEM'", pem.rstrip("\n"), "GPUCLUSTER_PEM",
                  f"chmod {mode} {path}.new"]
    lines += [f"mv -f {path}.new {path}" for path in sorted(files)]
    lines += ["systemctl daemon-reload", f"systemctl enable --now {TIMER}"]
    lines += [
        "systemctl restart etcd",
        "for _ in $(seq 1 60); do",
        f"  if {etcdctl_command(f'https://127.0.0.1:{CLIENT_PORT}', '5s')} endpoint health; then",
        '    echo "gpucluster: certificates installed, etcd healthy"',
        "    exit 0",
        "  fi",
        "  sleep 2",
        "done",
        'echo "gpucluster: etcd is not healthy after the restart; check journalctl -u etcd" >&2',
        "exit 1",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    try:
        export = json.loads(Path(args[0]).read_text(encoding="utf-8"))
        script = render_script(member_files(export, args[1]))
    except (OSError, json.JSONDecodeError, ExportError) as error:
        print(f"error: {args[0]}: {error}", file=sys.stderr)
        return 2
    sys.stdout.write(script)
    return 0


if __name__ == "__main__":
    sys.exit(main())
