"""Each boot document measured as Azure receives it, with certificates and keys of their real size
(components/offline/custom_data_size.py): the API servers' carries RSA 4096 CA and service-account keys, about
41 KB; a document over Azure's 65,535-byte customData cap is a plan error naming it."""

from __future__ import annotations

import pytest

from gpucluster.offline import custom_data_size
from gpucluster.offline.boot_docs import boot_documents
from gpucluster.offline.custom_data_size import CUSTOM_DATA_MAX, custom_data_problems, custom_data_sizes, real_size_value
from gpucluster.offline.engine import ProgramRun
from gpucluster.offline.preview import preview_document
from gpucluster.offline.program_check import check_program, new_states
from gpucluster.planning.cluster_plan import plan_cluster
from tests.support.stacks import stack_spec


def test_prods_documents_are_measured_with_real_keys_and_fit() -> None:
    plan = plan_cluster(stack_spec("prod"))
    sizes = custom_data_sizes(plan)
    markers = {name: len(text.encode()) for name, text in boot_documents(plan).items()}
    assert set(sizes) == set(markers)
    assert sizes["apiserver.yaml"] > 2 * markers["apiserver.yaml"]  # four RSA 4096 keys where the markers stood
    assert 30_000 < sizes["apiserver.yaml"] < CUSTOM_DATA_MAX
    assert max(sizes, key=sizes.__getitem__) == "apiserver.yaml"
    assert custom_data_problems(sizes) == []


def test_no_marker_is_left_where_a_value_goes() -> None:
    documents = boot_documents(plan_cluster(stack_spec("prod")), real_size_value)
    assert not any("[secret:" in text or "[at deploy:" in text for text in documents.values())
    assert "BEGIN PRIVATE KEY" in documents["apiserver.yaml"] and "BEGIN CERTIFICATE" in documents["apiserver.yaml"]


def test_the_values_have_the_pkis_sizes() -> None:
    material = custom_data_size._material()
    assert 3_200 < len(material["ca_key"]) < 3_300  # RSA 4096, PKCS#8 PEM
    assert len(material["leaf_key"]) < 300  # ECDSA P-256
    assert real_size_value(True, "/etc/kubernetes/pki/sa.key") == material["ca_key"]
    assert real_size_value(False, "/etc/kubernetes/pki/etcd/ca.crt") == material["ca_cert"]
    assert real_size_value(True, "etcd-0-server key") == material["leaf_key"]


def test_a_document_over_the_cap_is_one_plan_error_naming_it() -> None:
    [problem] = custom_data_problems({"apiserver.yaml": CUSTOM_DATA_MAX + 1, "etcd-0.yaml": 24_000})
    assert problem.path == "boot/apiserver.yaml"
    assert f"{CUSTOM_DATA_MAX + 1:,} bytes" in problem.message and "65,535" in problem.message
    assert custom_data_problems({"apiserver.yaml": CUSTOM_DATA_MAX}) == []


def test_plan_and_program_refuse_a_document_over_the_cap(dev_run: ProgramRun, monkeypatch: pytest.MonkeyPatch) -> None:
    """The refusals `gpucluster plan` and `pulumi up` share (program_check.check_program) include the size: with a cap
    below dev's API-server document, it is refused; at Azure's cap, nothing is."""
    plan = plan_cluster(stack_spec("dev"))
    document = preview_document(dev_run)
    assert check_program(plan, new_states(document)) == []
    monkeypatch.setattr(custom_data_size, "CUSTOM_DATA_MAX", 10_000)
    problems = check_program(plan, new_states(document))
    assert "boot/apiserver.yaml" in {p.path for p in problems}
    assert all("customData" in p.message for p in problems)
