"""Builds the consumers (e2e/consumers.py) from the Go module proxy into .cache/consumers/<name>-<version>/, once.

    python -m e2e.build [name ...]     # all when none is named

A build is kept while its go.mod, go.sum, flags and Go version are unchanged (recorded in build.json beside the
binaries); Go's own build cache makes a rebuild after a flag change a link. Progress goes to stderr, one line per
step, and a failed build exits 1 naming the consumer and the log to read.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from e2e.consumers import CONSUMERS, Consumer, by_name, install_dir


def _say(message: str) -> None:
    print(f"==> {message}", file=sys.stderr, flush=True)


def go_version() -> str:
    return subprocess.run(["go", "env", "GOVERSION"], capture_output=True, text=True, check=True).stdout.strip()


def recipe(consumer: Consumer, go: str) -> dict[str, object]:
    """What a build depends on: the same recipe gives the same binaries."""
    module = consumer.module
    sums = hashlib.sha256((module / "go.mod").read_bytes() + (module / "go.sum").read_bytes()
                          if (module / "go.sum").exists() else (module / "go.mod").read_bytes()).hexdigest()
    return {"name": consumer.name, "version": consumer.version, "commit": consumer.commit, "go": go,
            "modules_sha256": sums, "ldflags": list(consumer.ldflags), "tags": list(consumer.tags),
            "env": consumer.env, "assets": [list(a) for a in consumer.assets],
            "packages": [p for _, p in consumer.binaries], "pin": consumer.pin,
            "how": "go build -trimpath from the Go module proxy, module e2e/consumers/" + consumer.name}


def built(consumer: Consumer, go: str) -> dict[str, object] | None:
    record = install_dir(consumer) / "build.json"
    if not record.exists():
        return None
    saved = json.loads(record.read_text())
    if {k: saved.get(k) for k in recipe(consumer, go)} != recipe(consumer, go):
        return None
    if not all((install_dir(consumer) / "bin" / out).exists() for out, _ in consumer.binaries):
        return None
    return saved


def build(consumer: Consumer, go: str) -> dict[str, object]:
    saved = built(consumer, go)
    if saved is not None:
        _say(f"{consumer.name} {consumer.version}: built ({install_dir(consumer)})")
        return saved
    target = install_dir(consumer)
    staging = target.with_name(target.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    (staging / "bin").mkdir(parents=True)
    log = staging / "build.log"
    env = {**os.environ, **consumer.env, "GOFLAGS": "-mod=readonly", "GOWORK": "off"}
    args = ["go", "build", "-trimpath", "-o", str(staging / "bin") + "/"]
    if consumer.tags:
        args += ["-tags", ",".join(consumer.tags)]
    if consumer.ldflags:
        args += ["-ldflags", " ".join(consumer.ldflags)]
    started = time.monotonic()
    for out, package in consumer.binaries:
        _say(f"{consumer.name} {consumer.version}: building {out} ({package})")
        with log.open("a") as sink:
            result = subprocess.run([*args[:4], str(staging / "bin" / out), *args[5:], package], cwd=consumer.module,
                                    env=env, stdout=sink, stderr=subprocess.STDOUT)
        if result.returncode != 0:
            _say(f"{consumer.name}: go build {package} failed (exit {result.returncode}); see {log}")
            raise SystemExit(1)
    copy_assets(consumer, staging, env)
    record = {**recipe(consumer, go), "build_seconds": round(time.monotonic() - started, 1),
              "reports": reported_version(consumer, staging)}
    (staging / "build.json").write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)
    _say(f"{consumer.name} {consumer.version}: built in {record['build_seconds']} s")
    return record


def copy_assets(consumer: Consumer, staging: Path, env: dict[str, str]) -> None:
    for module, folder, name in consumer.assets:
        root = subprocess.run(["go", "list", "-m", "-f", "{{.Dir}}", module], cwd=consumer.module, env=env,
                              capture_output=True, text=True, check=True).stdout.strip()
        source = Path(root) / folder
        if not source.is_dir():
            _say(f"{consumer.name}: no {folder} in {module} ({root})")
            raise SystemExit(1)
        shutil.copytree(source, staging / "assets" / name)
        for path in (staging / "assets" / name).rglob("*"):
            path.chmod(0o755 if path.is_dir() else 0o644)  # the module cache's copies are read-only


def reported_version(consumer: Consumer, root: Path) -> str:
    """What the program says of its version (`--version` or its equivalent), '' for one that has no such flag."""
    if not consumer.version_args:
        return ""
    program, *args = consumer.version_args
    result = subprocess.run([str(root / "bin" / program), *args], capture_output=True, text=True, timeout=60)
    return (result.stdout + result.stderr).strip()


def main(argv: list[str]) -> int:
    if shutil.which("go") is None:
        print("error: make e2e builds its programs with Go 1.26 (the go command is not on PATH); install Go and "
              "re-run", file=sys.stderr)
        return 2
    names = argv or [c.name for c in CONSUMERS]
    unknown = [n for n in names if n not in {c.name for c in CONSUMERS}]
    if unknown:
        print(f"error: no consumer named {', '.join(unknown)}; choose from {', '.join(c.name for c in CONSUMERS)}",
              file=sys.stderr)
        return 2
    go = go_version()
    for i, name in enumerate(names, 1):
        _say(f"[{i}/{len(names)}] {name}")
        build(by_name(name), go)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
