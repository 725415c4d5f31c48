"""The node images' containerd configuration (components/bake/content.py `containerd_config`) read by the real
containerd at the version the images install (e2e/consumers.py `containerd`: upstream v2.2.1, the release Ubuntu's
2.2.1 packages carry), through `containerd --config <file> config dump`: the configuration containerd runs with,
its file and every drop-in its `imports` reach merged, as TOML.

Only the `imports` glob moves, from /etc/containerd/conf.d to a folder of the test's. (containerd reads the imports
of the files it loads; the dump also lists its built-in default pattern, /etc/containerd/conf.d/*.toml, which it does
not read unless a file names it: cmd/containerd/command/config.go `platformAgnosticDefaultConfig`,
cmd/containerd/server/config/config.go `LoadConfig`.)

The drop-in is the one NVIDIA's `nvidia-ctk runtime configure --runtime=containerd --set-as-default` writes beside a
version 3 config, as NVIDIA/nvidia-container-toolkit v1.19.1 (commit 09ceee5dde66ba9ce25c7cc69b1ebd5e6e3266fa)
builds it: cmd/nvidia-ctk/runtime/configure/configure.go (the drop-in at /etc/containerd/conf.d/99-nvidia.toml, the
runtime `nvidia` at /usr/bin/nvidia-container-runtime, the top-level file as the source); pkg/config/engine/
containerd/containerd.go (`New`: plugin `io.containerd.cri.v1.runtime` for version 3, and `getBaseDropInConfigTree`:
the drop-in starts as a copy of the source's whole CRI runtime plugin table); pkg/config/engine/containerd/config.go
(`GetDefaultRuntimeOptions`: the new runtime copies the table of the default runtime, else runc, else crun;
`AddRuntimeWithOptions`: `version`, `options.BinaryName` and, with --set-as-default, `default_runtime_name`);
pkg/config/engine/containerd/config_drop_in.go (the top-level file keeps an `imports` entry that already names the
drop-in's folder). A base image that ran it makes `nvidia` every pod's runtime: the bake removes drop-ins it did not
render (images/lib/bake.sh `clear_containerd_drop_ins`) and checks the result (`require_default_runtime`).
"""

from __future__ import annotations

import copy
import json
import subprocess
import tomllib
from pathlib import Path
from typing import Any

from e2e.consumers import CONTAINERD, binary
from e2e.report import E2EReport
from gpucluster.bake.content import CONTAINERD_CERTS_DIR, containerd_config
from gpucluster.catalog.in_cluster import PAUSE_IMAGE

ROOT = Path(__file__).resolve().parents[2]
RENDERED_IMPORTS = "imports = ['/etc/containerd/conf.d/*.toml']"
CRI_RUNTIME = "io.containerd.cri.v1.runtime"
NVIDIA_DROP_IN = "99-nvidia.toml"
NVIDIA_RUNTIME = "/usr/bin/nvidia-container-runtime"


def _write_config(etc: Path) -> Path:
    """The rendered config.toml at etc/config.toml, importing etc/conf.d/*.toml."""
    text = containerd_config()
    assert RENDERED_IMPORTS in text, text
    (etc / "conf.d").mkdir(parents=True, exist_ok=True)
    path = etc / "config.toml"
    path.write_text(text.replace(RENDERED_IMPORTS, f"imports = ['{etc}/conf.d/*.toml']"))
    return path


def _dump(config: Path) -> dict[str, Any]:
    done = subprocess.run([str(binary("containerd")), "--config", str(config), "config", "dump"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    # containerd warns of a key it does not know and goes on without it (server/config.go loadConfigFile).
    assert "unknown key" not in done.stderr.lower(), done.stderr
    return tomllib.loads(done.stdout)


def _toml(table: dict[str, Any], path: tuple[str, ...] = ()) -> list[str]:
    """`table` as TOML: its values, then its tables (headers with quoted dotted names), keys sorted."""
    values = [f"{k} = {json.dumps(v)}" for k, v in sorted(table.items()) if not isinstance(v, dict)]
    header = [".".join(json.dumps(p) if "." in p else p for p in path).join("[]")] if path else []
    lines = [*header, *values, ""]
    for key, value in sorted(table.items()):
        if isinstance(value, dict):
            lines += _toml(value, (*path, key))
    return lines


def nvidia_ctk_drop_in(source: dict[str, Any]) -> str:
    """What `nvidia-ctk runtime configure --runtime=containerd --set-as-default` writes to conf.d/99-nvidia.toml for
    the version 3 config `source` (the module docstring names the source files)."""
    plugin = copy.deepcopy(source.get("plugins", {}).get(CRI_RUNTIME, {}))
    containerd = plugin.setdefault("containerd", {})
    runtimes = containerd.setdefault("runtimes", {})
    default = containerd.get("default_runtime_name", "")
    low_level = [*([default] if default and not default.startswith("nvidia") else []), "runc", "crun"]
    options = next((copy.deepcopy(runtimes[r]) for r in low_level if r in runtimes),
                   {"runtime_type": "io.containerd.runc.v2", "runtime_root": "", "runtime_engine": "",
                    "privileged_without_host_devices": False})
    options.setdefault("options", {})["BinaryName"] = NVIDIA_RUNTIME
    runtimes["nvidia"] = options
    containerd["default_runtime_name"] = "nvidia"
    return "\n".join(_toml({"version": source["version"], "plugins": {CRI_RUNTIME: plugin}}))


def _cri(dump: dict[str, Any]) -> dict[str, Any]:
    return dump["plugins"][CRI_RUNTIME]["containerd"]


def test_containerd_reads_the_rendered_config_with_runc_and_the_systemd_cgroup_driver(
        tmp_path: Path, report: E2EReport) -> None:
    dump = _dump(_write_config(tmp_path))
    cri = _cri(dump)
    report.scenario("containerd reads the images' config.toml", "passed" if cri["default_runtime_name"] == "runc"
                    else "failed", containerd=CONTAINERD, default_runtime=cri["default_runtime_name"])
    assert dump["version"] == 3
    assert cri["default_runtime_name"] == "runc"
    assert cri["runtimes"]["runc"]["runtime_type"] == "io.containerd.runc.v2"
    assert cri["runtimes"]["runc"]["options"]["SystemdCgroup"] is True
    images = dump["plugins"]["io.containerd.cri.v1.images"]
    assert images["pinned_images"]["sandbox"] == PAUSE_IMAGE
    assert images["registry"]["config_path"] == CONTAINERD_CERTS_DIR


def test_nvidia_ctks_set_as_default_drop_in_makes_nvidia_every_pods_runtime(tmp_path: Path, report: E2EReport) -> None:
    config = _write_config(tmp_path)
    (tmp_path / "conf.d" / NVIDIA_DROP_IN).write_text(nvidia_ctk_drop_in(tomllib.loads(config.read_text())))
    cri = _cri(_dump(config))
    report.scenario("a base image's nvidia-ctk --set-as-default drop-in overrides the images' runtime", "passed"
                    if cri["default_runtime_name"] == "nvidia" else "failed", default_runtime=cri["default_runtime_name"])
    assert cri["default_runtime_name"] == "nvidia"
    assert cri["runtimes"]["nvidia"]["options"]["BinaryName"] == NVIDIA_RUNTIME
    assert cri["runtimes"]["nvidia"]["options"]["SystemdCgroup"] is True
    assert cri["runtimes"]["runc"]["options"]["SystemdCgroup"] is True


def _require_default_runtime(root: Path, name: str) -> subprocess.CompletedProcess[str]:
    """images/lib/bake.sh sourced as a bake sources it (an empty pins.env beside it), with ROOT the image's root and
    the real containerd first on PATH, then `require_default_runtime <name>`."""
    bundle = root.parent / "bundle"
    bundle.mkdir(exist_ok=True)
    (bundle / "pins.env").write_text("")
    script = f'. "$1"\nrequire_default_runtime {name}\necho "default runtime {name}"\n'
    return subprocess.run(["bash", "-c", script, "bash", str(ROOT / "images" / "lib" / "bake.sh")],
                          capture_output=True, text=True, timeout=60,
                          env={"PATH": f"{binary('containerd').parent}:/usr/bin:/bin", "ROOT": str(root),
                               "BUNDLE": str(bundle)})


def test_the_bakes_default_runtime_check_passes_the_rendered_config(tmp_path: Path) -> None:
    root = tmp_path / "root"
    _write_config(root / "etc" / "containerd")
    done = _require_default_runtime(root, "runc")
    assert done.returncode == 0 and done.stdout.strip() == "default runtime runc", done.stderr


def test_the_bakes_default_runtime_check_refuses_nvidia_ctks_drop_in(tmp_path: Path) -> None:
    root = tmp_path / "root"
    config = _write_config(root / "etc" / "containerd")
    (config.parent / "conf.d" / NVIDIA_DROP_IN).write_text(nvidia_ctk_drop_in(tomllib.loads(config.read_text())))
    done = _require_default_runtime(root, "runc")
    assert done.returncode == 1 and "default runtime" not in done.stdout, done.stdout
    assert "containerd's default runtime is 'nvidia', not runc" in done.stderr, done.stderr
