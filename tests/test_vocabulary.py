"""Every label, taint, annotation and tag name is spelled once: in components/vocabulary.py.

The scan reads every string literal of components/ and policies/ (docstrings aside; comments are not literals) and
fails on a name outside the vocabulary: a Kubernetes-style qualified name (`<dns-domain>/<name>`, as labels,
taints and annotations are written), or one of the cluster's Azure tag names. Two places keep copies, on purpose:
- policies/rules/props.py: the policy pack runs as a folder of its own under the Pulumi CLI (policies/__main__.py
  imports `rules`, without components/ on its path); its names must equal the vocabulary's (checked here);
- agents/: the node agents ship standalone in the agents image (standard library only,
  agents/Dockerfile); each of their names is a module constant equal to a vocabulary name (checked here, so
  a copy cannot drift and no selector is spelled inline).
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from pathlib import Path

import gpucluster.policies.rules.props as props
import gpucluster.vocabulary as vocabulary

ROOT = Path(__file__).resolve().parent.parent
VOCABULARY = ROOT / "components" / "vocabulary.py"
NOT_SCANNED = (ROOT / "components" / "agents", VOCABULARY, ROOT / "policies" / "rules" / "props.py")
QUALIFIED = re.compile(r"(?<![A-Za-z0-9._/-])(?:[a-z0-9-]+\.)+[a-z]{2,}/[A-Za-z0-9._-]+(?![A-Za-z0-9._/-])")
API_VERSION = re.compile(r"/v\d+((alpha|beta)\d+)?$")
TAG = re.compile(r"(?<![A-Za-z0-9_-])(gpucluster-(cluster|role|pool|infiniband|kubernetes-version|kubernetes-end-of-life)"
                 r"|k8s\.io_cluster-autoscaler_[A-Za-z0-9_.~-]*|cluster-autoscaler-(enabled|name))(?![A-Za-z0-9_-])")
NOT_NAMES = {
    # Qualified-looking strings that are no label, taint, annotation or tag name.
    "k8s.io/kubernetes": "a Go module path (components/catalog/versions.py sources)",
    "k8s.io/cloud-provider": "a Go module path",
    "k8s.io/kubelet": "a Go module path",
    "nvcr.io/nvidia": "an image registry path",
    "registry.k8s.io/pause": "an image repository",
    "kubernetes.io/releases": "a web page cited in a policy's description",
    "jobset.x-k8s.io/jobset": "a Kueue integration framework name (kueue.py, spelled once)",
    "kubeflow.org/pytorchjob": "a Kueue integration framework name",
    "kubeflow.org/mpijob": "a Kueue integration framework name",
    "trainer.kubeflow.org/trainjob": "a Kueue integration framework name",
}
POLICY_COPIES = {
    "CLUSTER_TAG": "CLUSTER_TAG", "ROLE_TAG": "ROLE_TAG", "POOL_TAG": "POOL_TAG", "INFINIBAND_TAG": "INFINIBAND_TAG",
    "KUBERNETES_VERSION_TAG": "KUBERNETES_VERSION_TAG", "KUBERNETES_EOL_TAG": "KUBERNETES_EOL_TAG",
    "AUTOSCALER_ENABLED_TAG": "AUTOSCALER_ENABLED_TAG", "GPUS_TAG": "AUTOSCALER_GPUS_TAG",
    "GPU_RESOURCE": "GPU_RESOURCE", "ZONE_LABEL": "LABEL_ZONE", "LABEL_COMPONENT": "LABEL_COMPONENT",
    "ANNOTATION_WATCH_REASON": "ANNOTATION_WATCH_REASON", "LABEL_RACK": "LABEL_RACK",
    "ANNOTATION_SPARE_RACKS": "ANNOTATION_SPARE_RACKS", "LABEL_TAG_PREFIX": "AUTOSCALER_LABEL_TAG_PREFIX",
}
"""policies/rules/props.py name -> components/vocabulary.py name."""


def _sources() -> list[Path]:
    files = [*(ROOT / "components").rglob("*.py"), *(ROOT / "policies").rglob("*.py")]
    return sorted(f for f in files if not any(f == n or n in f.parents for n in NOT_SCANNED))


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        for statement in body if isinstance(body, list) else []:
            if (isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant)
                    and isinstance(statement.value.value, str)):
                found.add(id(statement.value))
    return found


def names_in(source: str) -> list[tuple[int, str]]:
    """(line, name) of every label/taint/annotation/tag name in the source's string literals, f-string parts
    included, docstrings aside."""
    tree = ast.parse(source)
    skip = _docstrings(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
            found += [(node.lineno, m.group()) for m in QUALIFIED.finditer(node.value)
                      if not API_VERSION.search(m.group()) and m.group() not in NOT_NAMES]
            found += [(node.lineno, m.group()) for m in TAG.finditer(node.value)]
    return found


def test_no_name_spelled_outside_the_vocabulary() -> None:
    spelled = [f"{f.relative_to(ROOT)}:{line}: {name}" for f in _sources() for line, name in names_in(f.read_text())]
    assert not spelled, "import these names from components/vocabulary.py:\n" + "\n".join(spelled)


def test_the_scan_finds_names_in_literals_and_f_strings_not_in_docstrings() -> None:
    source = ('"""gpucluster.io/pool in a docstring."""\n'
              'A = {"gpucluster.io/pool": x, "apiVersion": "rbac.authorization.k8s.io/v1"}\n'
              'B = f"--startup-taint=gpucluster.io/preflight:{y}"\n'
              'C = ("gpucluster-role", "gpucluster-roles", "k8s.io_cluster-autoscaler_node-template_label_")\n')
    assert [n for _, n in names_in(source)] == ["gpucluster.io/pool", "gpucluster.io/preflight", "gpucluster-role",
                                                "k8s.io_cluster-autoscaler_node-template_label_"]


def test_every_name_in_the_vocabulary_once() -> None:
    values = [v for k, v in vars(vocabulary).items() if k.isupper() and isinstance(v, str)]
    assert not [v for v, n in Counter(values).items() if n > 1]
    tree = ast.parse(VOCABULARY.read_text())
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)} | {
        a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert imported <= {"__future__"}, "the vocabulary is the bottom of components/: it imports nothing"


def test_the_policy_packs_copies_equal_the_vocabulary() -> None:
    for pack_name, name in POLICY_COPIES.items():
        assert getattr(props, pack_name) == getattr(vocabulary, name), pack_name
    # Every name-shaped constant of the pack's props is one of the copies.
    shaped = {k for k, v in vars(props).items() if k.isupper() and isinstance(v, str)
              and (QUALIFIED.fullmatch(v) or TAG.fullmatch(v))}
    assert shaped == set(POLICY_COPIES)



SCRIPTS = ROOT / "agents"


def agent_names(path: Path) -> tuple[list[str], list[str]]:
    """(names spelled inline, names not in the vocabulary) of one node agent's source, as `<file>:<line>: <name>`.
    A name is spelled as a module constant when it is the whole value of a module-level `NAME = "<text>"`."""
    tree = ast.parse(path.read_text())
    constants = {node.lineno for node in tree.body if isinstance(node, ast.Assign)
                 and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)}
    values = {v for k, v in vars(vocabulary).items() if k.isupper() and isinstance(v, str)}
    found = names_in(path.read_text())
    return ([f"{path.name}:{line}: {name}" for line, name in found if line not in constants],
            [f"{path.name}:{line}: {name}" for line, name in found if name not in values])


def test_the_node_agents_copies_are_the_vocabularys() -> None:
    """The agents ship standalone (standard library only) and keep their own copies of the names, each a module
    constant equal to a vocabulary name: a copy that drifts, a name the vocabulary lacks or one spelled inline (a
    selector built in an f-string) fails here."""
    inline: list[str] = []
    unknown: list[str] = []
    for path in sorted(SCRIPTS.glob("*.py")):
        found = agent_names(path)
        inline += found[0]
        unknown += found[1]
    assert not inline, "spell these as module constants:\n" + "\n".join(inline)
    assert not unknown, "add these to components/vocabulary.py:\n" + "\n".join(unknown)


def test_the_agent_scan_finds_inline_and_unknown_names(tmp_path: Path) -> None:
    agent = tmp_path / "agent.py"
    agent.write_text('POOL = "gpucluster.io/pool"\nODD = "gpucluster.io/not-a-name"\n'
                     'def f(p):\n    return f"gpucluster.io/pool={p}"\n')
    assert agent_names(agent) == (["agent.py:4: gpucluster.io/pool"], ["agent.py:2: gpucluster.io/not-a-name"])
