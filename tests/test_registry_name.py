"""The registry's default name is another for every subscription (components/spec/registry_name.py): registry names
are global across Azure, so two users of one shipped stack must not get the same one. `gpucluster plan` and the
program read the subscription from the same places, and the program under the real engine refuses to deploy to
another subscription than the one the name was made from."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from gpucluster.errors import SpecError
from gpucluster.offline.mock_values import SUBSCRIPTION
from gpucluster.spec import load_stack_file
from gpucluster.spec.registry_name import SUBSCRIPTION_CONFIG, SUBSCRIPTION_ENV, naming_subscription
from tests.support.cli import gpucluster
from tests.support.stacks import ROOT, STACKS

ALICE = "11111111-2222-3333-4444-555555555555"
BOB = "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"


def _dev(folder: Path, **config: str) -> Path:
    document = yaml.safe_load((STACKS / "Pulumi.dev.yaml").read_text())
    document["config"].update(config)
    folder.mkdir(exist_ok=True)
    path = folder / "Pulumi.dev.yaml"
    path.write_text(yaml.safe_dump(document))
    return path


def _name(path: Path) -> str | None:
    return load_stack_file(path, "dev").spec.registry.name


def test_two_subscriptions_get_two_names_and_one_subscription_always_the_same(tmp_path: Path) -> None:
    alice = _name(_dev(tmp_path / "a", **{SUBSCRIPTION_CONFIG: ALICE}))
    bob = _name(_dev(tmp_path / "b", **{SUBSCRIPTION_CONFIG: BOB}))
    assert alice and bob and alice != bob
    assert alice.startswith("devacr") and len(alice) == len("devacr") + 8
    assert _name(_dev(tmp_path / "a", **{SUBSCRIPTION_CONFIG: ALICE.upper()})) == alice  # a GUID's case is not part


@given(st.uuids(), st.uuids())
def test_the_name_follows_the_subscription_and_fits_azures_rule(first: object, second: object) -> None:
    from gpucluster.planning.azure_names import container_registry_name

    one, two = (container_registry_name("prod", "eastus2", str(s)) for s in (first, second))
    assert one.isalnum() and 5 <= len(one) <= 50
    assert (one == two) == (first == second)


def test_the_stack_config_comes_before_the_environment() -> None:
    assert naming_subscription({SUBSCRIPTION_CONFIG: ALICE}, {SUBSCRIPTION_ENV: BOB}) == (ALICE, SUBSCRIPTION_CONFIG)
    assert naming_subscription({}, {SUBSCRIPTION_ENV: BOB}) == (BOB, SUBSCRIPTION_ENV)
    assert naming_subscription({}, {}) == ("", "")


@pytest.mark.parametrize("value", ["prod", "1111-2222", 42])
def test_a_value_that_is_not_a_subscription_id_names_its_key(value: object) -> None:
    with pytest.raises(SpecError) as refused:
        naming_subscription({SUBSCRIPTION_CONFIG: value}, {})
    assert refused.value.problems[0].path == SUBSCRIPTION_CONFIG and "not a subscription id" in str(refused.value)


def test_a_stack_that_names_its_registry_keeps_that_name(tmp_path: Path) -> None:
    document = yaml.safe_load((STACKS / "Pulumi.dev.yaml").read_text())
    document["config"]["gpucluster:cluster"]["registry"] = {"name": "ourregistry1"}
    path = tmp_path / "Pulumi.dev.yaml"
    path.write_text(yaml.safe_dump(document))
    assert _name(path) == "ourregistry1"


def test_without_a_subscription_the_plan_refuses_in_one_line_with_the_fix(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != SUBSCRIPTION_ENV}
    done = gpucluster("plan", "dev", "--out", str(tmp_path / "out"), "--quiet", env=env)
    assert done.returncode == 2, done.stderr
    assert "cluster.registry.name" in done.stderr and "global across Azure" in done.stderr
    assert f"pulumi config set {SUBSCRIPTION_CONFIG}" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").rglob("summary.json"))


_GUARD = """
import sys
import pulumi
from pulumi.runtime import mocks

class Azure(mocks.Mocks):
    def new_resource(self, args):
        return args.name, args.inputs
    def call(self, args):
        return {"subscriptionId": sys.argv[1], "tenantId": "t", "clientId": "c", "objectId": "o"}, []

pulumi.runtime.set_mocks(Azure(), preview=False)
from gpucluster.errors import SpecError
from gpucluster.offline.program_check import require_subscription
try:
    require_subscription(sys.argv[2], "AZURE_SUBSCRIPTION_ID")
except SpecError as error:
    print(error.problems[0].path, "|", error.problems[0].message, "|", error.problems[0].fix)
    sys.exit(2)
"""


@pytest.mark.parametrize(("deploys_to", "named", "refused"), [(ALICE, ALICE, False), (BOB, ALICE, True),
                                                             (SUBSCRIPTION, SUBSCRIPTION, False)])
def test_the_program_refuses_a_provider_in_another_subscription_than_the_name(
        deploys_to: str, named: str, refused: bool) -> None:
    done = subprocess.run([sys.executable, "-c", _GUARD, deploys_to, named], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == (2 if refused else 0), done.stderr
    if refused:
        assert f"made from subscription {named} (AZURE_SUBSCRIPTION_ID), but azure-native deploys to {deploys_to}" \
            in done.stdout and f"pulumi config set azure-native:subscriptionId {deploys_to}" in done.stdout
