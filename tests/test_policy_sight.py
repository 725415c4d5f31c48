"""What a CrossGuard rule can see, shown with the installed pulumi-policy (1.21, pinned >=1.13,<2 in pyproject) and the
analyzer protocol the installed pulumi SDK (3.272) was generated from: the new inputs of one resource, its options and
provider, the stack's tags (and, through PULUMI_CONFIG, its config); never the old state, never the operation the
engine plans. So the pack alone cannot tell a replacement from a create, and the replacement guard sits in the node
scale sets' provider diff (components/azure/replacement_guard.py; docs/architecture.md "What a policy can see").
"""

from __future__ import annotations

import contextvars
import json
from typing import Any

import pulumi
import pytest
from google.protobuf import struct_pb2
from pulumi.runtime import proto
from pulumi.runtime.config import CONFIG
from pulumi.runtime.proto import analyzer_pb2
from pulumi_policy import EnforcementLevel, ResourceValidationArgs, ResourceValidationPolicy
from pulumi_policy.policy import _PolicyAnalyzerServicer

H100, H200 = "Standard_ND96isr_H100_v5", "Standard_ND96isr_H200_v5"


def _fields(message: Any) -> set[str]:
    return {f.name for f in message.DESCRIPTOR.fields}


def test_the_analyzer_protocol_carries_no_old_state_and_no_operation() -> None:
    """proto/pulumi/analyzer.proto as generated into pulumi 3.272 (pulumi/runtime/proto/analyzer_pb2.py): Analyze gets
    one resource's new properties (the engine sends the inputs, pkg/resource/deploy/step_generator.go analyzeAll, before
    it asks the provider to Diff), AnalyzeStack the final outputs of the new states."""
    assert _fields(analyzer_pb2.AnalyzeRequest) == {"type", "properties", "urn", "name", "options", "provider"}
    assert _fields(analyzer_pb2.AnalyzerResource) == {"type", "properties", "urn", "name", "options", "provider",
                                                      "parent", "dependencies", "propertyDependencies"}
    assert _fields(analyzer_pb2.AnalyzeStackRequest) == {"resources"}
    assert _fields(analyzer_pb2.AnalyzerResourceOptions) == {
        "protect", "ignoreChanges", "deleteBeforeReplace", "deleteBeforeReplaceDefined", "additionalSecretOutputs",
        "aliases", "customTimeouts", "parent"}
    assert "config" in _fields(analyzer_pb2.AnalyzerStackConfigureRequest)


def test_a_rule_is_handed_the_new_inputs_and_the_stack_config_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """The pack's own servicer (pulumi_policy 1.21 `_PolicyAnalyzerServicer`, what `PolicyPack` serves) run on the
    request the engine sends for prod's first H100 domain after a vmSize edit: the rule's arguments hold H200 and
    nothing of H100. The stack's config reaches the pack process as PULUMI_CONFIG (pulumi/pulumi
    sdk/go/common/resource/plugin/analyzer_plugin.go constructEnv) and `pulumi.Config` reads it; ConfigureStack keeps
    the tags only."""
    seen: list[ResourceValidationArgs] = []
    config: list[Any] = []

    def validate(args: ResourceValidationArgs, _report: Any) -> None:
        seen.append(args)
        config.append(pulumi.Config("gpucluster").get_object("cluster"))

    rule = ResourceValidationPolicy("sight", "records what a rule is given", validate)
    servicer = _PolicyAnalyzerServicer("gpucluster", "0.0.1", [rule], EnforcementLevel.MANDATORY)
    properties = struct_pb2.Struct()
    properties.update({"armType": "Microsoft.Compute/virtualMachineScaleSets", "vmScaleSetName": "h100-z1-00",
                       "sku": {"name": H200, "capacity": 98}, "tags": {"gpucluster-pool": "h100"}})
    request = proto.AnalyzeRequest(type="pulumi-python:dynamic:Resource", properties=properties, name="h100-z1-00",
                                   urn="urn:pulumi:prod::gpucluster::pulumi-python:dynamic:Resource::h100-z1-00")
    stack = {"gpucluster:cluster": json.dumps({"acknowledgeDeletions": {"infinibandDomains": ["h100-z1-*"]}})}

    def run() -> None:
        CONFIG.set({})  # this context's own config map: the pack's settings do not leak into other tests
        servicer.ConfigureStack(proto.AnalyzerStackConfigureRequest(stack="prod", config=stack,
                                                                    tags={"owner": "ml"}), None)
        servicer.Analyze(request, None)

    monkeypatch.setenv("PULUMI_CONFIG", json.dumps(stack))
    contextvars.copy_context().run(run)
    [args] = seen
    assert set(vars(args)) == {"resource_type", "props", "urn", "name", "opts", "provider", "stack_tags",
                               "_ResourceValidationArgs__config"}
    assert args.props["sku"]["name"] == H200 and H100 not in repr(dict(args.props))
    assert dict(args.stack_tags) == {"owner": "ml"}
    assert config == [{"acknowledgeDeletions": {"infinibandDomains": ["h100-z1-*"]}}]
