"""Extract the options the plan's `az` commands use from the azure-cli wheel itself: the arguments of
`az vm run-command create` (`command_modules/vm/_params.py`, the block for `vm run-command create`/`update`, and
`custom.py` vm_run_command_create's parameters), of `az vm run-command show` (its block and vm_run_command_show's)
and of `az login` (`command_modules/profile/__init__.py`), with the
wheel's version and sha256.

    python -m tools.az_cli_args <azure_cli-X.Y.Z-py3-none-any.whl>   # writes components/catalog/facts/az_cli_args.json

(`pip download azure-cli==X.Y.Z --no-deps` fetches the wheel.) An argument without `options_list` is
`--<dest with dashes>` (knack's default); `resource_group_name` is azure-cli core's `--resource-group`/`-g`."""

from __future__ import annotations

import hashlib
import re
import sys
import zipfile
from pathlib import Path

from tools.facts_home import FACTS, generator_of, write_facts

OUT = FACTS / "az_cli_args.json"
VM_PARAMS = "azure/cli/command_modules/vm/_params.py"
VM_CUSTOM = "azure/cli/command_modules/vm/custom.py"
PROFILE = "azure/cli/command_modules/profile/__init__.py"
ARGUMENT = re.compile(r"c\.argument\('(\w+)'(?:,\s*(?!options_list)(\w+))?(?:[^)]*?options_list=[\[(]([^\])]*)[\])])?")
ARG_TYPE = re.compile(r"^\s*(\w+) = CLIArgumentType\(options_list=\[([^\]]*)\]", re.M)
OPTION = re.compile(r"'(-[-\w]+)'")


def _block(source: str, start: str, end: str) -> str:
    begin = source.index(start)
    return source[begin:source.index(end, begin)]


def _options(block: str, types: dict[str, list[str]]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for dest, arg_type, options in ARGUMENT.findall(block):
        given = OPTION.findall(options) if options else types.get(arg_type, [])
        out[dest] = given or [f"--{dest.replace('_', '-')}"]
    return out


def extract(wheel: Path) -> dict[str, object]:
    with zipfile.ZipFile(wheel) as archive:
        params, custom, profile = (archive.read(p).decode() for p in (VM_PARAMS, VM_CUSTOM, PROFILE))
    version = re.search(r"azure_cli-([\d.]+)-", wheel.name)
    types = {name: OPTION.findall(options) for name, options in ARG_TYPE.findall(params)}
    run_command = _options(_block(params, "with self.argument_context('vm run-command {}'.format(scope))",
                                  "with self.argument_context('vm run-command list')"), types)
    signature = _block(custom, "def vm_run_command_create(", "):")
    for dest in re.findall(r"(\w+)(?:=[^,]*)?,", signature):
        if dest == "resource_group_name":
            run_command[dest] = ["--resource-group", "-g"]
    show = _options(_block(params, "with self.argument_context('vm run-command show')",
                           "with self.argument_context('vm run-command wait')"), types)
    show_signature = _block(custom, "def vm_run_command_show(", "):")
    if "resource_group_name" in show_signature:
        show["resource_group_name"] = ["--resource-group", "-g"]
    login = _options(_block(profile, "with self.argument_context('login')", "with self.argument_context('logout')"), {})
    return {"source": "azure-cli", "version": version.group(1) if version else "",
            "wheelSha256": hashlib.sha256(wheel.read_bytes()).hexdigest(),
            "paths": [VM_PARAMS, VM_CUSTOM, PROFILE],
            "commands": {"vm run-command create": dict(sorted(run_command.items())),
                         "vm run-command show": dict(sorted(show.items())), "login": dict(sorted(login.items()))}}


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    write_facts(OUT, generator_of(__file__), extract(Path(argv[1])), sort_keys=True)
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
