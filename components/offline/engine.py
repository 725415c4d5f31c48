"""Run a Pulumi program in-process under mocks and record every registration as the engine sees it."""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import json
import pickletools
import runpy
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulumi
from google.protobuf import json_format
from pulumi.runtime import mocks as pulumi_mocks
from pulumi.runtime import settings as pulumi_settings
from pulumi.runtime.stack import run_pulumi_func, wait_for_rpcs

from gpucluster.catalog.autonaming import autoname
from gpucluster.catalog.preview_values import UNKNOWN, UNKNOWN_MARK
from gpucluster.offline.mock_values import computed_state, invoke_result

SECRET_SIG = "1b47061264138c4ac30d75fd1eb44270"
RESOURCE_SIG = "5cf8f73096256a8f31e491e813e4eb8e"
SIG_KEY = "4dabf18193072939515e22adb298388d"
SECRET_MARK = "[secret]"
DYNAMIC_PROVIDER_KEY = "__provider"
"""pulumi.dynamic's input holding the pickled provider (base64): shown as the class it names, not its bytes."""


@dataclass(frozen=True)
class Registration:
    urn: str
    type: str
    name: str
    custom: bool
    parent: str
    inputs: dict[str, Any]
    """camelCase inputs with secret values replaced by "[secret]"."""
    secret_paths: tuple[str, ...]
    protect: bool
    ignore_changes: tuple[str, ...]
    dependencies: tuple[str, ...]
    provider: str
    secret_digests: tuple[tuple[str, str], ...] = ()
    """(path, sha256 of the value) per secret input: what a diff compares where the value itself is masked.
    Offline the secret values are mock keys and rendered boot text, so the digest reveals nothing real."""


@dataclass
class ProgramRun:
    project: str
    stack: str
    registrations: list[Registration] = field(default_factory=list)
    outputs: dict[str, Any] = field(default_factory=dict)


def secret_digest(value: Any) -> str:
    return "sha256:" + hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()


def _scrub(value: Any, path: str, secrets: list[str], digests: list[tuple[str, str]] | None = None) -> Any:
    """Replace secret and resource-reference envelopes; note where the secrets were (and their digests)."""
    if isinstance(value, dict):
        signature = value.get(SIG_KEY)
        if signature == SECRET_SIG:
            secrets.append(path or "$")
            if digests is not None:
                digests.append((path or "$", secret_digest(value.get("value"))))
            return SECRET_MARK
        if signature == RESOURCE_SIG:
            return value.get("urn", "")
        return {k: _scrub(v, f"{path}.{k}" if path else k, secrets, digests) for k, v in value.items()}
    if isinstance(value, list):
        return [_scrub(v, f"{path}[{i}]", secrets, digests) for i, v in enumerate(value)]
    if value == UNKNOWN:
        return UNKNOWN_MARK
    if isinstance(value, float) and value.is_integer():
        return int(value)  # protobuf carries every number as a double
    return value


def provider_label(serialized: Any) -> str:
    """`[dynamic provider module.Class]` for a pickled dynamic provider (pickled by reference to its class)."""
    try:
        ops = list(pickletools.genops(base64.b64decode(str(serialized), validate=True)))
    except (binascii.Error, ValueError):
        return "[dynamic provider]"
    strings: list[str] = []
    for op, arg, _ in ops:
        if op.name == "STACK_GLOBAL" and len(strings) >= 2:
            return f"[dynamic provider {strings[-2]}.{strings[-1]}]"
        if isinstance(arg, str):
            strings.append(arg)
    return "[dynamic provider]"


class _Mocks(pulumi_mocks.Mocks):
    """Computed state for each resource; outputs the provider declares secret come back secret, as the engine does."""

    def __init__(self) -> None:
        self.pending = threading.local()  # the registering request's additionalSecretOutputs, per worker thread

    def new_resource(self, args: pulumi_mocks.MockResourceArgs) -> tuple[str | None, dict[Any, Any]]:
        resource_id, state = computed_state(args.typ, args.name, dict(args.inputs))
        for key in getattr(self.pending, "secret_outputs", ()):
            if key in state:
                state[key] = {SIG_KEY: SECRET_SIG, "value": state[key]}
        return resource_id, state

    def call(self, args: pulumi_mocks.MockCallArgs) -> tuple[dict[Any, Any], list[tuple[str, str]] | None]:
        return invoke_result(args.token), []  # the SDK iterates the failures list


class RecordingMonitor(pulumi_mocks.MockMonitor):
    """The SDK's mock monitor, keeping what `pulumi preview` would show for each registration."""

    def __init__(self, run: ProgramRun, on_register: Callable[[int], None] | None = None) -> None:
        self.secret_mocks = _Mocks()
        super().__init__(self.secret_mocks)
        self.run = run
        self.on_register = on_register

    def RegisterResource(self, request: Any) -> Any:  # noqa: N802 - gRPC method name
        if request.type != "pulumi:pulumi:Stack":
            urn = self.make_urn(request.parent, request.type, request.name)
            named = autoname(request.type, urn, request.name, {k: request.object[k] for k in request.object})
            if request.custom and named is not None:
                request.object[named[0]] = named[1]  # the provider's autoname, as `pulumi preview` shows it
            raw = json_format.MessageToDict(request.object, preserving_proto_field_name=True)
            secrets: list[str] = []
            digests: list[tuple[str, str]] = []
            if DYNAMIC_PROVIDER_KEY in raw:
                raw[DYNAMIC_PROVIDER_KEY] = provider_label(raw[DYNAMIC_PROVIDER_KEY])
            inputs = _scrub(raw, "", secrets, digests)
            self.run.registrations.append(Registration(
                urn=urn,
                type=request.type,
                name=request.name,
                custom=bool(request.custom),
                parent=request.parent,
                inputs=inputs,
                secret_paths=tuple(secrets),
                protect=bool(request.protect),
                ignore_changes=tuple(request.ignoreChanges),
                dependencies=tuple(request.dependencies),
                provider=request.provider,
                secret_digests=tuple(sorted(digests)),
            ))
            if self.on_register is not None:
                self.on_register(len(self.run.registrations))
        self.secret_mocks.pending.secret_outputs = tuple(request.additionalSecretOutputs)
        return super().RegisterResource(request)


def _config_value(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value)


async def _resolve_outputs(root: pulumi.Resource) -> dict[str, Any]:
    resolved: dict[str, Any] = {}
    for name, value in getattr(root, "outputs", {}).items():
        output = pulumi.Output.from_input(value)
        secret = await output.is_secret()
        resolved[name] = SECRET_MARK if secret else await output.future()
    return resolved


def run_program(program: Path, project: str, stack: str, config: dict[str, Any],
                on_register: Callable[[int], None] | None = None) -> ProgramRun:
    """Run `program` (a Pulumi `__main__.py`) with `config` and return what it registered.
    `on_register` hears the running count of registrations (progress output)."""
    run = ProgramRun(project, stack)
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        monitor = RecordingMonitor(run, on_register)
        pulumi.runtime.set_mocks(monitor.mocks, project=project, stack=stack, preview=False, monitor=monitor)
        pulumi.runtime.set_all_config({key: _config_value(value) for key, value in config.items()})
        root = pulumi.runtime.get_root_resource()

        def execute() -> None:
            runpy.run_path(str(program), run_name="__main__")

        loop.run_until_complete(run_pulumi_func(execute))
        loop.run_until_complete(wait_for_rpcs())
        if root is not None:
            run.outputs = loop.run_until_complete(_resolve_outputs(root))
    finally:
        pulumi_settings.reset_options()
        pulumi.runtime.set_all_config({})
        loop.close()
        asyncio.set_event_loop(None)
    return run
