"""Property test of the job API against its own OpenAPI document (schemathesis): for data the
document allows and data it does not, no 5xx and no answer the document does not describe.

Bounded and derandomised: the same examples on every run, a few hundred requests per backend.
Run it alone with `python -m pytest tests/integration/test_api_fuzz.py`.
"""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode, checks

from tests.fakes.model_server import Reply
from tests.integration.services import API_TOKEN

pytestmark = pytest.mark.integration

EXAMPLES_PER_OPERATION = 25
CHECKS = [
    checks.not_a_server_error,
    checks.status_code_conformance,
    checks.content_type_conformance,
    checks.response_headers_conformance,
    checks.response_schema_conformance,
    checks.negative_data_rejection,  # data the document forbids is refused with a 4xx
]
SETTINGS = settings(
    max_examples=EXAMPLES_PER_OPERATION,
    derandomize=True,  # the same examples every run: CI is not flaky, a failure reproduces
    database=None,
    deadline=None,  # a request's time is the service's business here, not the property's
    suppress_health_check=list(HealthCheck),
)


@pytest.fixture
def schema(services):
    return schemathesis.openapi.from_url(services.base_url + "/v1/api/openapi.json")


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE], ids=str)
@pytest.mark.parametrize("real_workstream", [True, False], ids=["existing-ws", "any-ws-id"])
def test_every_operation_answers_as_its_document_says(
    services, api, model, workdir, schema, mode, real_workstream
):
    # Whatever the fuzzed sends ask, the model answers at once with plain text.
    for _ in range(EXAMPLES_PER_OPERATION * 2):
        model.enqueue(Reply(text="fuzzed"))
    ws_id = api.create_workstream(working_dir=str(workdir)) if real_workstream else None
    headers = {"Authorization": f"Bearer {API_TOKEN}"}
    tested = []
    for result in schema.get_all_operations():
        operation = result.ok()
        has_ws_id = "{ws_id}" in operation.path
        if real_workstream and not has_ws_id:
            continue  # the same cases as the other run
        if mode is GenerationMode.NEGATIVE and not (list(operation.iter_parameters()) or operation.body):
            continue  # no input to get wrong
        path_parameters = {"ws_id": ws_id} if real_workstream else None
        strategy = operation.as_strategy(generation_mode=mode, path_parameters=path_parameters)

        @SETTINGS
        @given(case=strategy)
        def check(case: schemathesis.Case) -> None:
            case.call_and_validate(base_url=services.base_url, headers=headers, checks=CHECKS)

        check()
        tested.append(operation.label)
    assert tested
