"""A `gpucluster` process that runs one command line per line of stdin (JSON: a list of arguments) and answers with
one JSON line: the exit code, what went to stderr, and the traceback of anything that escaped the command. Used by
the property tests so that each example costs a command, not an interpreter start; the process runs under the
memory limit the test sets on it."""

from __future__ import annotations

import contextlib
import io
import json
import sys
import traceback

from gpucluster.cli import main


def run(args: list[str]) -> dict[str, object]:
    out, err = io.StringIO(), io.StringIO()
    code: object = None
    escaped = None
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(args)
        except SystemExit as leaving:
            code = leaving.code
        except BaseException:  # reported to the test, which fails on it
            escaped = traceback.format_exc()
    return {"exit": code, "stderr": err.getvalue()[-4000:], "traceback": escaped}


if __name__ == "__main__":
    for line in sys.stdin:
        print(json.dumps(run(json.loads(line))), flush=True)
