"""The CPU a model step spends before its request leaves, as the conversation grows: reading the
conversation, building the system prompt and the neutral history, and preparing and sending the
request (up to the fake model's answer headers). CPU time of the step's thread, so the figures
hold up on a machine busy with other work; in-process, against a real database and Redis.

Run: python -m bench.model_step_cost [--backend sqlite|postgresql] [--sizes 10 100 500]
                                     [--provider openai|anthropic]
"Whole" is how a step read and sent before issue 9 (the whole conversation through the ORM, the
SDK's `chat.completions.create` or `messages.create`); "now" is the worker's copy (its rows, and
each row's entry for the model made once, with what the wire format makes of it) and the body
serialised in one go.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

from tests.fakes.model_server import FakeModelServer, Reply
from tests.integration.services import start_private_redis_if_absent

RUNS = 15


@contextmanager
def in_process(backend: str) -> Iterator[tuple[Any, FakeModelServer, str]]:
    private = start_private_redis_if_absent()  # before the storage helpers read its address
    from tests.integration import storage

    try:
        with FakeModelServer() as model, tempfile.TemporaryDirectory() as tmp:
            made: Any = storage.runtime(backend, Path(tmp), model)  # a generator: close() cleans up
            rt = next(made)
            try:
                yield rt, model, tmp
            finally:
                made.close()
    finally:
        if private is not None:
            private.stop()


def fill(rt: Any, ws_id: str, size: int) -> None:
    """`size` messages as bash turns leave them: user, assistant with a call, tool, assistant."""
    from app.storage.models import Message

    with rt.db.session() as s:
        for n in range(size // 4):
            call = {
                "id": f"c{n}",
                "type": "function",
                "function": {"name": "bash", "arguments": '{"command": "ls"}'},
            }
            s.add(Message(ws_id=ws_id, role="user", content=f"list the files, round {n}"))
            s.add(Message(ws_id=ws_id, role="assistant", content="", tool_calls=[call]))
            s.add(
                Message(
                    ws_id=ws_id, role="tool", content="a.txt\nb.txt\n" * 5, tool_call_id=f"c{n}", name="bash"
                )
            )
            s.add(Message(ws_id=ws_id, role="assistant", content="There are two files, a.txt and b.txt."))


def step_cost(rt: Any, model: FakeModelServer, ws_id: str, whole: bool, provider: str) -> dict[str, float]:
    """CPU ms of each part of one step's preparation."""
    import anthropic
    import openai

    from app.engine.conversation import prompt, stored
    from app.providers import anthropic_messages, openai_chat
    from app.providers.base import api_key_for, cached_client
    from app.storage.models import Workstream
    from app.tools.core import tool_search_plan
    from app.tools.core import toolset as toolsets

    parts: dict[str, float] = {}

    def timed(name: str, work: Callable[[], Any]) -> Any:
        start = time.thread_time()
        out = work()
        parts[name] = (time.thread_time() - start) * 1000
        return out

    def read() -> tuple[Any, list[Any]]:
        with rt.db.reader() as s:
            ws = s.get(Workstream, ws_id)
            if whole:
                rows = stored.messages(s, ws_id)
            else:
                rows = rt.conversations.model_entries(s, ws_id, stored.model_entry)
        return ws, rows

    ws, rows = timed("read conversation", read)
    settings = rt.settings.model(ws.model)
    if provider == "anthropic":
        settings = replace(settings, provider="anthropic", base_url=model.anthropic_base_url, max_tokens=1024)

    def build() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        search = tool_search_plan.plan(rt.settings.tools, ws.tool_search, settings)
        tools = toolsets.build(rt.registry, rt.tool_sources, ws.kind, ws.expanded_tools, search)
        system = prompt.build(
            prompt.PromptContext(ws, tools, rt.settings, db=rt.db, message="go"), rt.prompt_sections
        )
        history = stored.for_model(system, rows) if whole else stored.arrange(system, rows)
        return history, tools.schemas(ws.working_dir, rt.settings.tools.workspace_dir)

    history, schemas = timed("prompt and history", build)
    model.enqueue(Reply(text="ok"))

    def send() -> None:
        if provider == "anthropic":
            client = cached_client(anthropic.Anthropic, api_key_for(settings), settings.base_url, 60.0)
            params = anthropic_messages.request_params(settings, history, schemas)
            stream = client.messages.create(**params) if whole else anthropic_messages._post(client, params)
        else:
            client = cached_client(openai.OpenAI, api_key_for(settings), settings.base_url, 60.0)
            params = openai_chat.request_params(settings, history, schemas)
            stream = client.chat.completions.create(**params) if whole else openai_chat._post(client, params)
        stream.close()

    timed("prepare and send request", send)
    parts["total"] = sum(parts.values())
    return parts


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", default="sqlite", choices=["sqlite", "postgresql"])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 100, 500])
    parser.add_argument("--provider", default="openai", choices=["openai", "anthropic"])
    args = parser.parse_args()
    from app.engine.life import workstreams

    results: dict[tuple[str, int], list[dict[str, float]]] = {}
    with in_process(args.backend) as (rt, model, tmp):
        for size in args.sizes:
            ws = workstreams.create(rt, name=f"bench {size}", working_dir=tmp)
            fill(rt, ws.id, size)
            for how in ("whole", "now"):
                step_cost(rt, model, ws.id, how == "whole", args.provider)  # warm: connections, the copy
                results[(how, size)] = [
                    step_cost(rt, model, ws.id, how == "whole", args.provider) for _ in range(RUNS)
                ]
    print(f"backend: {args.backend}; {args.provider} format; CPU ms of the step's thread, median of {RUNS}")
    names = list(next(iter(results.values()))[0])
    print(f"{'':<28}" + "".join(f"{f'{how} {size}':>12}" for size in args.sizes for how in ("whole", "now")))
    for name in names:
        cells = "".join(
            f"{statistics.median(r[name] for r in results[(how, size)]):>12.2f}"
            for size in args.sizes
            for how in ("whole", "now")
        )
        print(f"{name:<28}{cells}")


if __name__ == "__main__":
    main()
