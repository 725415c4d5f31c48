"""Read, in pulumi/pulumi's source, what the replacement guard and "What a policy can see" rest on, and save it as a
small catalogue (components/catalog/facts/consumers/pulumi-engine.json: repository, commit, and per fact the file, the exact text
and its line). docs/architecture.md ("What a policy can see", "The replacement guard") cites these; the test
(tests/test_pulumi_engine_facts.py) reads only the catalogue, and checks the installed SDK's host beside it.

    python -m tools.pulumi_engine_facts --mirrors <folder of git dirs, one per owner+name> [--ref <commit or tag>]

The mirror's newest commit when read: 1b5949891b (v3.259.0 and 14 commits); the SDK installed from PyPI is 3.272,
whose `pulumi/dynamic/__main__.py` and `pulumi/runtime/proto/analyzer_pb2.py` the tests read directly.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

from tools.consumer_facts.mirrors import git, mirror
from tools.facts_home import CONSUMERS, generator_of, write_facts

ROOT = Path(__file__).resolve().parent.parent
OUT = CONSUMERS / "pulumi-engine.json"
REPO = "pulumi/pulumi"


@dataclass(frozen=True)
class Fact:
    name: str
    path: str
    text: str
    """Exact text that must appear in the file (first occurrence; its line is recorded)."""
    means: str


FACTS = (
    Fact("analyze-gets-inputs", "proto/pulumi/analyzer.proto",
         'Called with the "inputs" to the resource, before it is updated.',
         "a resource rule is handed the new inputs only"),
    Fact("analyze-stack-gets-outputs", "proto/pulumi/analyzer.proto",
         'The provided resources are the "outputs", after any mutations',
         "a stack rule sees the final outputs, after the update"),
    Fact("analyze-before-diff", "pkg/resource/deploy/step_generator.go",
         "analyzeInvalid, err := sg.analyzeAll(ctx, analyzers, new, inputs, goal)",
         "the engine runs the analyzers on the new inputs ..."),
    Fact("diff-after-analyze", "pkg/resource/deploy/step_generator.go",
         "return sg.generateStepsFromDiff(",
         "... and asks the provider to Diff after (a later line of the same function)"),
    Fact("untargeted-no-diff", "pkg/resource/deploy/step_generator.go",
         "do no 'Diff' and just treat the resource as 'same'",
         "`pulumi up --target` asks Diff of the targets only"),
    Fact("pack-config-env", "sdk/go/common/resource/plugin/analyzer_plugin.go",
         'maybeAppendEnv("PULUMI_CONFIG", config)',
         "the stack's config reaches the policy pack's process"),
    Fact("deployment-context-per-update", "pkg/engine/update.go",
         "info, err := newDeploymentContext(",
         "each engine run (preview or update) builds its own deployment context"),
    Fact("host-per-deployment", "pkg/engine/deployment.go",
         "The engine owns it and closes it when the deployment context terminates.",
         "the plugin host lives as long as one deployment"),
    Fact("context-close-releases", "sdk/go/common/resource/plugin/context.go",
         "err := ctx.Host.ReleaseContext(ctx)",
         "closing the context releases what the host booted for it"),
    Fact("release-closes-resource-plugins", "pkg/host/host.go",
         'errs = append(errs, fmt.Errorf("closing resource plugin %q: %w", plug.Name, err))',
         "ReleaseContext closes each resource plugin of that context"),
    Fact("default-provider-once", "pkg/resource/deploy/default_providers.go",
         "Have we loaded this provider before? Use the existing reference, if so.",
         "one default provider per package and version"),
    Fact("one-plugin-per-reference", "pkg/resource/deploy/providers/registry.go",
         "provider, ok := r.providers[ref]",
         "the registry maps a provider reference to one plugin"),
    Fact("dynamic-plugin-is-the-host", "sdk/python/dist/pulumi-resource-pulumi-python",
         '"${PULUMI_PYTHON_CMD:-python3}" -u -m pulumi.dynamic $@',
         "the pulumi-python resource plugin is `python -m pulumi.dynamic`"),
    Fact("up-stops-on-preview-error", "pkg/backend/apply.go",
         "if err != nil || kind == apitype.PreviewUpdate {",
         "`pulumi up` returns when its preview failed"),
    Fact("step-error-cancels", "pkg/resource/deploy/deployment_executor.go",
         "ex.reportError(ex.deployment.generateEventURN(event), err)",
         "an error generating steps is reported against the resource, then the deployment cancels"),
    Fact("chain-stops-between-steps", "pkg/resource/deploy/step_executor.go",
         'se.log(workerID, "step %v on %v canceled", step.Op(), step.URN())',
         "a step chain checks the cancellation before each step"),
)


def extract(repo_dir: Path, ref: str) -> dict[str, object]:
    commit = git(repo_dir, "rev-parse", f"{ref}^{{commit}}").strip()
    texts: dict[str, str] = {}
    facts = []
    for fact in FACTS:
        text = texts.setdefault(fact.path, git(repo_dir, "show", f"{commit}:{fact.path}"))
        at = text.find(fact.text)
        if at < 0:
            raise SystemExit(f"{REPO} {commit[:10]} {fact.path}: {fact.text!r} not found ({fact.name})")
        facts.append({"name": fact.name, "path": fact.path, "line": text.count("\n", 0, at) + 1, "text": fact.text,
                      "means": fact.means})
    return {"repository": REPO, "commit": commit, "facts": facts}


def main() -> int:
    parser = argparse.ArgumentParser(description="Read the pulumi engine facts the replacement guard rests on.")
    parser.add_argument("--mirrors", type=Path, required=True)
    parser.add_argument("--ref", default="HEAD")
    args = parser.parse_args()
    catalogue = extract(mirror(args.mirrors, REPO), args.ref)
    write_facts(OUT, generator_of(__file__), catalogue)
    print(f"wrote {OUT.relative_to(ROOT)}: {len(FACTS)} facts at {REPO} {str(catalogue['commit'])[:10]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
