"""The guard where the engine sees a replacement: the node scale sets' provider `diff`, run in Pulumi's real
dynamic-provider host (`python -m pulumi.dynamic` over gRPC, tests/support/dynamic_host.py), as `pulumi preview` and
`pulumi up` send it Diff RPCs. A one-line vmSize change (prod's H100 -> H200) answers "replace" for every domain of
the pool; the host refuses the second unacknowledged InfiniBand domain of the pool in one deployment (one host
process: components/azure/scale_set/replacement_guard.py says why), with one line naming the pool, the domains and the key.
"""

from __future__ import annotations

import copy
import functools
import re
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import grpc
import pytest
from pulumi.dynamic.dynamic import serialize_provider
from pulumi.runtime import proto

from gpucluster.azure.scale_set.provider import ScaleSetProvider
from gpucluster.azure.scale_set.replacement_guard import ACK_KEY, ReplacementLedger, ReplacementRefusedError
from gpucluster.azure.scale_set.routes import REPLACEMENT_ACK_INPUT, SCALE_SET_ARM_TYPE
from gpucluster.diff.compare import diff_sides
from gpucluster.diff.sides import side_from_document
from gpucluster.offline.engine import ProgramRun, run_program
from gpucluster.offline.first_up import urn_glob
from gpucluster.offline.preview import preview_document
from gpucluster.spec import ClusterSpec
from tests.support.dynamic_host import dynamic_host, props
from tests.support.stacks import ROOT, small_cluster

H100, H200 = "Standard_ND96isr_H100_v5", "Standard_ND96isr_H200_v5"
STATE = serialize_provider(ScaleSetProvider())


def _domains(prod_run: ProgramRun, pool: str = "h100") -> list[dict[str, Any]]:
    """Each InfiniBand domain's declared inputs (as the old state holds them), with the state's `__provider`."""
    return [{**copy.deepcopy(r.inputs), "__provider": STATE} for r in sorted(prod_run.registrations, key=lambda r: r.name)
            if r.custom and r.inputs.get("armType") == SCALE_SET_ARM_TYPE
            and r.inputs["tags"].get("gpucluster-pool") == pool]


def _resized(olds: dict[str, Any], acknowledged: bool = False) -> dict[str, Any]:
    news = {**copy.deepcopy(olds), "sku": {**olds["sku"], "name": H200}}
    if acknowledged:
        news[REPLACEMENT_ACK_INPUT] = True
    return news


def _diff(host: Any, olds: dict[str, Any], news: dict[str, Any]) -> Any:
    name = olds["vmScaleSetName"]
    return host.Diff(proto.DiffRequest(
        id=f"/subscriptions/{olds['subscriptionId']}/resourceGroups/{olds['resourceGroupName']}/providers/"
           f"{SCALE_SET_ARM_TYPE}/{name}", urn=f"urn:pulumi:prod::gpucluster::pulumi-python:dynamic:Resource::{name}",
        name=name, olds=props(olds), news=props(news)))


def _refusal(error: grpc.RpcError) -> str:
    """The refusal's one line: the host sends the traceback (pulumi/dynamic/__main__.py `_abort_with_traceback`),
    whose last line is the exception."""
    last = str(error.details()).strip().splitlines()[-1]  # type: ignore[attr-defined]
    assert last.startswith(f"{ReplacementRefusedError.__module__}.{ReplacementRefusedError.__name__}: ")
    return last.split(": ", 1)[1]


def test_the_second_domain_of_a_pool_is_refused_in_one_deployment_and_admitted_in_the_next(
        prod_run: ProgramRun) -> None:
    first, second, *_ = _domains(prod_run)
    [cpu, *_] = _domains(prod_run, "cpu")
    with dynamic_host() as host:
        admitted = _diff(host, first, _resized(first))
        assert admitted.changes == proto.DiffResponse.DIFF_SOME and list(admitted.replaces) == ["sku"]
        assert admitted.deleteBeforeReplace
        with pytest.raises(grpc.RpcError) as refused:
            _diff(host, second, _resized(second))
        line = _refusal(refused.value)
        assert line.startswith(f"pool h100: replacing InfiniBand domain {second['vmScaleSetName']} (sku.name {H100} -> "
                               f"{H200}) as well as {first['vmScaleSetName']} in one deployment")
        assert ACK_KEY in line and "'h100-*'" in line and "--target" in line and "\n" not in line
        assert f"\n{line}\n" in (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")  # the doc shows it
        # the first domain asked again (a second Diff of one resource) counts once
        assert list(_diff(host, first, _resized(first)).replaces) == ["sku"]
        # changes that replace nothing, and a pool without InfiniBand, are not counted
        retagged = {**second, "tags": {**second["tags"], "gpucluster-note": "x"}}
        assert _diff(host, second, retagged).changes == proto.DiffResponse.DIFF_SOME
        assert list(_diff(host, cpu, {**cpu, "sku": {**cpu["sku"], "name": "Standard_D96ds_v5"}}).replaces) == ["sku"]
    with dynamic_host() as host:  # the next deployment: a new host process, the second domain's turn
        assert list(_diff(host, second, _resized(second)).replaces) == ["sku"]


def test_acknowledged_domains_all_replace(prod_run: ProgramRun) -> None:
    domains = _domains(prod_run)
    assert len(domains) == 32
    with dynamic_host() as host:
        answers = [_diff(host, d, _resized(d, acknowledged=True)) for d in domains]
        assert all(list(a.replaces) == ["sku"] for a in answers)
        # the acknowledgement alone is no change: adding it to the stack updates nothing
        first = domains[0]
        assert _diff(host, first, {**first, REPLACEMENT_ACK_INPUT: True}).changes == proto.DiffResponse.DIFF_NONE
        # with all of them acknowledged, one more unacknowledged domain of the pool is still admitted (at most one)
        assert list(_diff(host, domains[0], _resized(domains[0])).replaces) == ["sku"]


def test_four_diffs_at_once_admit_exactly_one(prod_run: ProgramRun) -> None:
    """The host answers 4 RPCs at once (ThreadPoolExecutor(max_workers=4)): the ledger admits one domain of them."""
    domains = _domains(prod_run)[:4]
    with dynamic_host() as host:
        def ask(olds: dict[str, Any]) -> str:
            try:
                _diff(host, olds, _resized(olds))
                return "admitted"
            except grpc.RpcError as error:
                return _refusal(error)

        with ThreadPoolExecutor(4) as engine:
            outcomes = list(engine.map(ask, domains))
    assert outcomes.count("admitted") == 1
    assert all(o.startswith("pool h100: replacing InfiniBand domain") for o in outcomes if o != "admitted")


def test_the_documented_target_names_one_scale_set(prod_run: ProgramRun) -> None:
    """docs/operations.md's one-domain-per-change command targets exactly that domain's scale set (the engine's URN
    globs: components/offline/first_up.py `urn_glob`)."""
    text = (ROOT / "docs" / "operations.md").read_text(encoding="utf-8")
    [glob] = re.findall(r"pulumi up --target '([^']+)'", text)
    matched = [r for r in prod_run.registrations if urn_glob(glob).fullmatch(r.urn)]
    assert [(r.name, r.inputs.get("armType")) for r in matched] == [("h100-z1-00", SCALE_SET_ARM_TYPE)]


def test_the_ledger_alone() -> None:
    ledger = ReplacementLedger()
    tags = {"gpucluster-pool": "h100", "gpucluster-infiniband": "true"}
    ledger.admit("/s/a", "h100-z1-00", tags, False, "sku")
    ledger.admit("/S/A", "h100-z1-00", tags, False, "sku")  # ARM ids compare without case
    ledger.admit("/s/b", "h100-z1-01", tags, True, "sku")
    ledger.admit("/s/c", "a100-z1-00", {**tags, "gpucluster-pool": "a100"}, False, "sku")
    ledger.admit("/s/d", "cpu-z1-00", {"gpucluster-pool": "h100", "gpucluster-infiniband": "false"}, False, "sku")
    with pytest.raises(ReplacementRefusedError, match="pool h100: replacing InfiniBand domain h100-z2-00"):
        ledger.admit("/s/e", "h100-z2-00", tags, False, "sku")


@functools.cache
def _acknowledging_run() -> ProgramRun:
    """A small stack whose acknowledgement names the gpu pool's zone-2 domains, run under the offline engine once."""
    raw = small_cluster(inCluster={"enabled": False},
                        acknowledgeDeletions={"infinibandDomains": ["gpu-z2-*"], "note": "drained"})
    return run_program(ROOT / "__main__.py", "gpucluster", "test",
                       {"azure-native:location": raw["location"], "gpucluster:cluster": raw})


def test_the_program_marks_the_scale_sets_the_stack_acknowledges() -> None:
    """`cluster.acknowledgeDeletions.infinibandDomains` reaches the provider as `replacementAcknowledged` on the
    scale sets it names (the diff's own matching: shell patterns), and on no other; it is never an ARM field."""
    run = _acknowledging_run()
    marked = {r.name: r.inputs.get(REPLACEMENT_ACK_INPUT) for r in run.registrations
              if r.custom and r.inputs.get("armType") == SCALE_SET_ARM_TYPE}
    said = {n for n in marked if n.startswith("gpu-z2-")}
    assert said and {n for n, v in marked.items() if v is True} == said
    assert all(v is None for n, v in marked.items() if n not in said) and len(marked) > len(said)
    [inputs] = [r.inputs for r in run.registrations if r.custom and r.name == sorted(said)[0]]
    assert not ScaleSetProvider().check({}, dict(inputs)).failures  # never sent to ARM: not an unknown field


def test_acknowledging_is_no_change_in_the_diff() -> None:
    """Adding the acknowledgement to a stack changes no scale set in `gpucluster diff` (nor in the provider's diff:
    components/azure/scale_set/routes.py scale_set_diff skips it)."""
    head = preview_document(_acknowledging_run())
    base = copy.deepcopy(head)
    for step in base["steps"]:
        step["newState"]["inputs"].pop(REPLACEMENT_ACK_INPUT, None)
    assert base != head
    result = diff_sides(side_from_document("test", base), side_from_document("test", head))
    assert [c for c in result.changes if c.action != "same"] == []


def test_the_acknowledgement_key_names_the_stack_field_that_acknowledges() -> None:
    """The refusal tells the user which key to set: it must be a key the stack file takes."""
    _, top, leaf = ACK_KEY.split(".")
    (field,) = [f for f in ClusterSpec.model_fields.values() if f.alias == top]
    model = field.annotation
    assert isinstance(model, type) and leaf in {f.alias for f in model.model_fields.values()}
