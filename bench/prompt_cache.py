"""How much of each model request a prompt cache could serve: over a 30-step bash session (one
turn, one auto-approved command a step), the share of the characters of each request (tools,
system prompt, messages, as sent) that start as the request before it did. The fake model
measures it (tests/fakes/model_server.py, `prefixes`); the first request has nothing before it
and is left out. On both wire formats; and once more where steps 10 and 20 save a memory the
turn's message finds relevant (the memory tool), which changes the memories the model is sent.

Run: python -m bench.prompt_cache [--steps 30] [--backend sqlite]
"""

from __future__ import annotations

import argparse

from bench.harness import running_service
from tests.fakes.model_server import Reply, ToolCall
from tests.integration.client import EventSocket

CONFIG = """
[models.claude]
provider = "anthropic"
model = "fake-claude"
base_url = "{anthropic}"
"""


MEMORY_STEPS = (9, 19)  # the 10th and 20th steps
MESSAGE = "list /usr/bin a little more each time"


def session(api, model, base_url: str, name: str | None, steps: int, workdir: str, memories: bool):  # type: ignore[no-untyped-def]  # noqa: E501
    """The prefix share over one session of `steps` bash steps on model `name`, and the tokens
    the replies reported read from the cache."""
    model.reset()
    model.prompt_cache = True
    ws_id = api.create_workstream(name="cache", model=name, auto_approve=True, working_dir=workdir)
    sock = EventSocket(base_url, api.token, ws_id)
    for n in range(steps - 1):
        if memories and n in MEMORY_STEPS:
            note = {"action": "save", "name": f"usr_bin_{n}", "content": f"{MESSAGE}: {n} lines so far"}
            model.enqueue(Reply(tool_calls=[ToolCall("memory", note)]))
            continue
        model.enqueue(Reply(tool_calls=[ToolCall("bash", {"command": f"ls -la /usr/bin | head -{20 + n}"})]))
    model.enqueue(Reply(text="done"))
    sock.wait_turn_end(api.send(ws_id, MESSAGE), timeout=300)
    sock.close()
    later = model.prefixes[1:]
    share = sum(s for s, _ in later) / max(1, sum(n for _, n in later))
    cached = sum((m.get("usage") or {}).get("cache_read_input_tokens", 0) for m in api.history(ws_id))
    return share, cached


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--backend", default="sqlite")
    args = parser.parse_args()
    with running_service(args.backend, config_toml=CONFIG) as (svc, api, model):
        print(f"backend: {args.backend}; one turn of {args.steps} steps per wire format")
        runs = [(f"{wire}{' +memories' if memories else ''}", name, memories) for memories in (False, True)
                for wire, name in (("openai", None), ("anthropic", "claude"))]  # fmt: skip
        for label, name, memories in runs:
            share, cached = session(api, model, svc.base_url, name, args.steps, str(svc.tmp), memories)
            shown = f"unchanged prefix: {share:6.1%} of request characters; cache read {cached:,} tokens"
            print(f"{label:<20} {shown}")


if __name__ == "__main__":
    main()
