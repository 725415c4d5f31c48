"""Extract what `dcgmi diag -j` and `dcgmi health -c -j` write, from NVIDIA/DCGM's source at the release the GPU
operator runs, into components/catalog/facts/dcgm_output.json (the health agent's verdicts are tested against shapes
built from it).

    fetch NVIDIA/DCGM (the repository's snapshot), then
    .venv/bin/python -m tools.dcgm_output <DCGM git dir> v4.5.2

The tag follows gpu-operator v26.3.3 values.yaml `dcgm.version: 4.5.2-1-ubuntu22.04` (components/catalog/in_cluster.py
DCGM_IMAGE). Read: nvvs/include/NvvsJsonStrings.h (the diag's JSON keys), dcgmi/Diag.cpp HelperDisplayDiagResult (the
status strings) and HelperJsonAddResult (what a result that did not run writes), dcgmi/Diag.h (the default that turns a
Warn into "Fail" in JSON), dcgmi/Health.cpp (Overall Health, the health strings, the report's header) and
dcgmi/DcgmiOutput.h/.cpp (how dcgmi's JSON output nests sections, children, values and overflow lines)."""

from __future__ import annotations

import re
import subprocess
import sys
from typing import Any

from tools.facts_home import FACTS, generator_of, write_facts

OUT = FACTS / "dcgm_output.json"


def show(repo: str, tag: str, path: str) -> str:
    return subprocess.run(["git", "-C", repo, "show", f"{tag}:{path}"], capture_output=True, text=True,
                          check=True).stdout


def one(pattern: str, text: str, what: str) -> str:
    found = re.search(pattern, text, re.DOTALL)
    if found is None:
        raise SystemExit(f"not found at this tag: {what}")
    return found.group(1)


def extract(repo: str, tag: str) -> dict[str, Any]:
    commit = subprocess.run(["git", "-C", repo, "rev-parse", f"{tag}^{{commit}}"], capture_output=True, text=True,
                            check=True).stdout.strip()
    keys_h = show(repo, tag, "nvvs/include/NvvsJsonStrings.h")
    keys = dict(re.findall(r'#define\s+(NVVS_\w+)\s+"([^"]*)"', keys_h))
    diag_cpp, diag_h = show(repo, tag, "dcgmi/Diag.cpp"), show(repo, tag, "dcgmi/Diag.h")
    display = one(r"Diag::HelperDisplayDiagResult\(.*?\{(.*?)\n\}", diag_cpp, "HelperDisplayDiagResult")
    statuses: dict[str, str] = {}
    pending: list[str] = []
    for case, text in re.findall(r"case (DCGM_DIAG_RESULT_\w+):|return \"([^\"]*)\";", display):
        if case:
            pending.append(case)
        elif pending:
            statuses.update({case_name: str(text) for case_name in pending})
            pending = []
    default_warn = one(r"HelperDisplayDiagResult\(dcgmDiagResult_t val,\s*displayDiagResultWarn_enum showWarn = "
                       r"(\w+)\)", diag_h, "HelperDisplayDiagResult's default")
    add_result = one(r"bool Diag::HelperJsonAddResult\(.*?\{(.*?)\n\}", diag_cpp, "HelperJsonAddResult")
    health_cpp = show(repo, tag, "dcgmi/Health.cpp")
    health = dict(re.findall(r"health == (DCGM_HEALTH_RESULT_\w+)\)\s*return \"([^\"]+)\"", health_cpp))
    output_h, output_cpp = show(repo, tag, "dcgmi/DcgmiOutput.h"), show(repo, tag, "dcgmi/DcgmiOutput.cpp")
    return {
        "_source": f"NVIDIA/DCGM {tag} ({commit}), extracted by tools/dcgm_output.py",
        "repo": "NVIDIA/DCGM", "tag": tag, "commit": commit,
        "diag": {
            "top": keys["NVVS_NAME"], "categories": keys["NVVS_HEADERS"], "category": keys["NVVS_HEADER"],
            "tests": keys["NVVS_TESTS"], "results": keys["NVVS_RESULTS"], "status": keys["NVVS_STATUS"],
            "test_summary": keys["NVVS_TEST_SUMMARY"], "runtime_error": keys["NVVS_RUNTIME_ERROR"],
            "statuses": {k.removeprefix("DCGM_DIAG_RESULT_").lower(): v for k, v in sorted(statuses.items())},
            "json_shows_warn": default_warn == "DDR_DISPLAY_WARN",
            "not_run_written": "DCGM_DIAG_RESULT_NOT_RUN" not in add_result,
        },
        "health": {
            "overall": one(r'#define OVERALL_HEALTH_TAG\s+"([^"]+)"', health_cpp, "OVERALL_HEALTH_TAG"),
            "header": one(r'addHeader\("([^"]+)"\)', health_cpp, "the report's header"),
            "errors": one(r'outEntity\["(\w+)"\]', health_cpp, "the entity's error section"),
            "statuses": {k.removeprefix("DCGM_HEALTH_RESULT_").lower(): v for k, v in sorted(health.items())},
            "other": one(r'else\s*return "([^"]+)";\s*\}\s*/\*+/\s*std::string Health::HelperSystemToString',
                         health_cpp, "the health string of an unknown result"),
            "body": one(r'json\["(\w+)"\]\[sectionName\]', output_cpp, "the sections' key"),
            "children": one(r'json\["(\w+)"\]\[childName\]', output_cpp, "the children's key"),
            "value": one(r'json\["(\w+)"\]\s*= str;', output_h, "a value's key"),
            "overflow": one(r'json\["(\w+)"\]\.append\(str\)', output_h, "the overflow lines' key"),
            "header_key": one(r'json\["(\w+)"\];\s*header\.push_back', output_cpp, "the header's key"),
        },
    }


if __name__ == "__main__":
    write_facts(OUT, generator_of(__file__), extract(sys.argv[1], sys.argv[2]), indent=1, sort_keys=True)
    print(f"wrote {OUT}")
