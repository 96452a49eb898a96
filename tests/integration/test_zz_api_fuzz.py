"""Property test of the API against its own OpenAPI document (schemathesis): for data the
document allows and data it does not, no 5xx and no answer the document does not describe.

Bounded and derandomised: the same examples on every run, a few hundred requests per backend.
Run it alone with `python -m pytest tests/integration/test_zz_api_fuzz.py`. Named to run last in
each database's run of the suite: as an administrator it leaves behind what the API lets one make
(users, skills, MCP servers, schedules that keep firing), which later tests would otherwise meet.
"""

from __future__ import annotations

import time
import uuid

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode, checks
from schemathesis.config import SchemathesisConfig

from tests.fakes.model_server import Reply

pytestmark = pytest.mark.integration

EXAMPLES_PER_OPERATION = 25
CHECKS = [
    checks.not_a_server_error,
    checks.status_code_conformance,
    checks.content_type_conformance,
    checks.response_headers_conformance,
    checks.response_schema_conformance,
    checks.negative_data_rejection,  # data the document forbids is refused with a 4xx
    checks.positive_data_acceptance,  # data it allows is not refused (2xx, or 401/403/404/409/429)
]
SETTINGS = settings(
    max_examples=EXAMPLES_PER_OPERATION,
    derandomize=True,  # the same examples every run: CI is not flaky, a failure reproduces
    database=None,
    deadline=None,  # a request's time is the service's business here, not the property's
    suppress_health_check=list(HealthCheck),
)


# A request the document allows is answered 2xx, or refused for what no document can say: the
# caller may not (401, 403), what it names is not there or busy (404, 409), or is there but cannot
# be used (422: a skill not enabled, a host the SSRF guard refuses), or a limit (429). Never a 400:
# a 400 means the document forbids the request.
ACCEPTED = ["2xx", "401", "403", "404", "409", "422", "429"]
CONFIG = SchemathesisConfig.from_dict(
    {"checks": {"positive_data_acceptance": {"expected-statuses": ACCEPTED}}}
)


@pytest.fixture
def schema(services):
    return schemathesis.openapi.from_url(services.base_url + "/v1/api/openapi.json", config=CONFIG)


@pytest.fixture
def admin_token(api):
    """An administrator's token: the fuzzer calls as a person would (the operator's token has no
    user, so the calls that need one would only ever be refused)."""
    name = f"fuzzer{uuid.uuid4().hex[:8]}"
    made = api.http.post("/v1/api/users", json={"name": name, "password": "a long password", "admin": True})
    assert made.status_code == 201, made.text
    token = api.http.post("/v1/api/tokens", json={"user": name, "name": "fuzz"})
    assert token.status_code == 201, token.text
    return token.json()["token"]


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE], ids=str)
@pytest.mark.parametrize("real_workstream", [True, False], ids=["existing-ws", "any-ws-id"])
def test_every_operation_answers_as_its_document_says(
    services, api, model, workdir, schema, mode, real_workstream, admin_token
):
    # Whatever the fuzzed sends ask, the model answers at once with plain text.
    for _ in range(EXAMPLES_PER_OPERATION * 2):
        model.enqueue(Reply(text="fuzzed"))
    ws_id = api.create_workstream(working_dir=str(workdir)) if real_workstream else None
    headers = {"Authorization": f"Bearer {admin_token}"}
    tested: list[str] = []
    failures: list[str] = []
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

        try:
            check()
        except Unsatisfiable:
            # Nothing the document forbids can be written for this operation's inputs (a string
            # path parameter takes any string): there is no negative case to send.
            assert mode is GenerationMode.NEGATIVE, operation.label
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as exc:  # every operation is tried; all that fail are reported together
            failures.append(f"{operation.label}: {exc}")
        tested.append(operation.label)
    assert tested
    assert not failures, "\n\n".join(failures)


SETTLE_SECONDS = 30.0


def test_linked_calls_answer_as_the_document_says(services, api, model, schema, admin_token):
    """Stateful: the document's links lead from a created workstream to its send, approve,
    cancel, fork, history and state, so schemathesis chains them (create, then act on what it made).

    Hypothesis replays a scenario's first steps and requires the same answers each time (which
    steps come next depends on them), so every step meets a service at rest: after each call the
    test waits until the workstreams it touched have no turn in flight, and the chains are kept to
    the workstream paths, whose answers depend only on the calls before them (not on schedules
    firing in the background or a per-minute trigger limit, as other paths' do)."""
    for _ in range(200):
        model.enqueue(Reply(text="fuzzed"))
    headers = {"Authorization": f"Bearer {admin_token}"}
    touched: set[str] = set()
    steps: list[tuple[str, int]] = []

    def settle() -> None:
        deadline = time.monotonic() + SETTLE_SECONDS
        for ws_id in sorted(touched):
            while True:
                now = api.http.get(f"/v1/api/workstreams/{ws_id}", headers=headers)
                if now.status_code != 200 or _at_rest(now.json()):
                    break
                assert time.monotonic() < deadline, f"workstream {ws_id} never came to rest: {now.text}"
                time.sleep(0.05)

    class Workflow(schema.include(path_regex=r"^/v1/api/workstreams").as_state_machine()):  # type: ignore[misc]
        def get_call_kwargs(self, case: schemathesis.Case) -> dict:
            return {"headers": headers, "base_url": services.base_url}

        def after_call(self, response, case: schemathesis.Case) -> None:
            super().after_call(response, case)
            steps.append((case.operation.label, response.status_code))
            ws_id = (case.path_parameters or {}).get("ws_id")
            if isinstance(ws_id, str) and response.status_code < 400:  # a real one
                touched.add(ws_id)
            try:
                made = response.json()
            except ValueError:
                made = None
            if isinstance(made, dict) and isinstance(made.get("ws_id"), str):
                touched.add(made["ws_id"])
            settle()

        def validate_response(self, response, case, additional_checks=None, **kwargs) -> None:
            case.validate_response(response, checks=CHECKS, transport_kwargs=kwargs)

    Workflow.run(
        settings=settings(
            max_examples=15,
            stateful_step_count=6,
            derandomize=True,
            database=None,
            deadline=None,
            suppress_health_check=list(HealthCheck),
        )
    )
    # The chains went past their first step: something was made, then acted on.
    made = [label for label, status in steps if label == "POST /v1/api/workstreams" and status == 201]
    assert made, steps
    assert any(
        label != "POST /v1/api/workstreams" and "{ws_id}" in label and status < 400 for label, status in steps
    ), steps


def _at_rest(workstream: dict) -> bool:
    """No turn in flight: none at all, or one waiting for a person (approval, client tool)."""
    return workstream.get("active_turn_id") is None or workstream.get("state") == "attention"
