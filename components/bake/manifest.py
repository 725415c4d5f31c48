"""What a node image holds (its manifest) and the files a boot document names, so a document that names a file its
image lacks is a plan error before any machine boots it.

The manifest: the bundle's files (components/bake/content.py, installed by images/lib/bake.sh `install_files`),
the binaries the bake installs from releases (components/catalog/node_images.py, `ACR_CREDENTIAL_PROVIDER`), and the
files of its packages that documents and units name (`package_files`, merged-/usr aliases too; the bake checks they
are there, images/lib/bake.sh `require_package_files`).

Named by a document: the first word of every `Exec*=` line of a systemd unit it writes or its image carries, an
absolute `runcmd` program, every kubeadm `kubeletExtraArgs` value that is an absolute path, and for
`image-credential-provider-bin-dir` the binary of every provider its credential provider config names (the kubelet
execs `<bin dir>/<provider name>` and exits at start when one is missing, kubernetes `pkg/credentialprovider/plugin/
plugin.go`). A file the document writes itself is present.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import yaml

from gpucluster.bake.content import image_files
from gpucluster.catalog.node_images import ACR_CREDENTIAL_PROVIDER, MERGED_USR, NODE_IMAGES, package_files

_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
"""libyaml's reader (the same values as `yaml.safe_load`): every boot document of a plan is read here."""

BIN_DIR_FLAG = "image-credential-provider-bin-dir"
CONFIG_FLAG = "image-credential-provider-config"
EXEC_KEYS = ("ExecStart", "ExecStartPre", "ExecStartPost", "ExecStop", "ExecStopPost", "ExecReload",
             "ExecCondition")
"""systemd.service(5): the command lines a unit runs."""
EXEC_PREFIXES = "-@:+!"
"""systemd.service(5) "Command lines": special prefixes before the executable path."""


def _merged(paths: Iterable[str]) -> set[str]:
    found = set(paths)
    for path in list(found):
        for old, new in MERGED_USR.items():
            if path.startswith(old):
                found.add(new + path.removeprefix(old))
    return found


def image_manifest(definition: str) -> frozenset[str]:
    """Every file path `definition`'s image holds that a boot document may name."""
    files = {f.path for f in image_files(definition)}
    if NODE_IMAGES[definition].kubernetes:
        files.add(ACR_CREDENTIAL_PROVIDER.path)
    for package in package_files(definition):
        files |= _merged(package.files)
    return frozenset(files)


def _exec_paths(unit: str) -> set[str]:
    found = set()
    for line in unit.splitlines():
        key, _, value = line.strip().partition("=")
        if key in EXEC_KEYS and value:
            program = value.split()[0].lstrip(EXEC_PREFIXES)
            if program.startswith("/"):
                found.add(program)
    return found


def _kubelet_args(kubeadm: str) -> dict[str, str]:
    """kubeadm v1beta4 `nodeRegistration.kubeletExtraArgs` of every document in a kubeadm config file."""
    args: dict[str, str] = {}
    for document in yaml.load_all(kubeadm, Loader=_LOADER):
        registration = (document or {}).get("nodeRegistration") or {}
        for arg in registration.get("kubeletExtraArgs") or []:
            args[str(arg["name"])] = str(arg["value"])
    return args


def named_files(document: dict[str, Any], image_units: Iterable[str] = ()) -> set[str]:
    """The files a cloud-config document (and the units its image carries) names."""
    written = {str(f["path"]): str(f.get("content", "")) for f in document.get("write_files") or []}
    found: set[str] = set()
    for path, content in written.items():
        if path.endswith((".service", ".conf")) and "[Service]" in content:
            found |= _exec_paths(content)
        if path.endswith(".yaml") and "nodeRegistration" in content:
            args = _kubelet_args(content)
            found |= {v for v in args.values() if v.startswith("/")} - {args.get(BIN_DIR_FLAG, "")}
            if BIN_DIR_FLAG in args:
                config = yaml.load(written.get(args.get(CONFIG_FLAG, ""), "") or "{}", Loader=_LOADER) or {}
                found |= {f"{args[BIN_DIR_FLAG]}/{p['name']}" for p in config.get("providers") or []}
    for unit in image_units:
        found |= _exec_paths(unit)
    for command in document.get("runcmd") or []:
        program = command[0] if isinstance(command, list) else str(command).split()[0]
        if str(program).startswith("/"):
            found.add(str(program))
    return found


def missing_files(document_text: str, definition: str) -> list[str]:
    """The files a boot document names that neither it writes nor `definition`'s image holds, sorted."""
    document = yaml.load(document_text, Loader=_LOADER) or {}
    written = {str(f["path"]) for f in document.get("write_files") or []}
    units = [f.content for f in image_files(definition) if f.path.endswith((".service", ".conf"))]
    return sorted(named_files(document, units) - written - image_manifest(definition))
