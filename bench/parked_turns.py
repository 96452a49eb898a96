"""How many worker slots and how much memory turns parked for approval use.

Run: python -m bench.parked_turns [--turns 1000] [--backend sqlite|postgresql] [--warmup 16]

The service first runs `--warmup` bash turns to the end (so that pool threads, the model SDK and
the first connections are in place), then parks `--turns` turns, each on one bash call waiting for
approval, and prints what parking them added: web, worker and beat RSS, and Redis's used memory,
in all and per 1,000 parked turns.
"""

from __future__ import annotations

import argparse
import time

from bench.harness import rss_mib, running_service, thread_count
from bench.idle_memory import children
from tests.fakes.model_server import Reply, ToolCall


def active_tasks(svc) -> int:  # type: ignore[no-untyped-def]
    from app.settings import Settings
    from app.taskqueue import make_celery

    celery = make_celery(Settings.from_mapping({}, {"REDIS_URL": svc.redis_url}))
    replies = celery.control.inspect(timeout=2).active() or {}
    return sum(len(tasks) for tasks in replies.values())


def parked_count(api) -> int:  # type: ignore[no-untyped-def]
    listing = api.http.get("/v1/api/workstreams").json()["workstreams"]
    return sum(1 for ws in listing if ws["state"] == "attention")


def service_rss(svc) -> float:  # type: ignore[no-untyped-def]
    """Web (master and workers), worker and beat, in MiB."""
    return sum(
        rss_mib(pid) for name in ("web", "worker", "beat") for pid in children(svc.processes[name].pid)
    )


def warm_up(svc, api, model, turns: int) -> None:  # type: ignore[no-untyped-def]
    ws_ids = [api.create_workstream(name=f"warm {n}", working_dir=str(svc.workdir)) for n in range(turns)]
    for ws_id in ws_ids:
        model.enqueue(Reply(tool_calls=[ToolCall("bash", {"command": "echo warm"})]))
        api.send(ws_id, "warm up")
    while parked_count(api) < turns:
        time.sleep(0.2)
    for ws_id in ws_ids:
        model.enqueue(Reply(text="warm"))
        api.approve(ws_id, approved=True)
    for ws_id in ws_ids:
        api.wait_idle(ws_id, timeout=300)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=1000)
    parser.add_argument("--warmup", type=int, default=16, help="bash turns run to the end first")
    parser.add_argument("--backend", default="sqlite", choices=["sqlite", "postgresql"])
    args = parser.parse_args()
    with running_service(args.backend) as (svc, api, model):
        worker = svc.processes["worker"].pid
        warm_up(svc, api, model, args.warmup)
        time.sleep(2)
        rss_before, threads_before = rss_mib(worker), thread_count(worker)
        service_before = service_rss(svc)
        redis_before = svc.redis.info("memory")["used_memory"]
        ws_ids = [
            api.create_workstream(name=f"parked {n}", working_dir=str(svc.workdir)) for n in range(args.turns)
        ]
        for _ in ws_ids:
            model.enqueue(Reply(tool_calls=[ToolCall("bash", {"command": "echo approved"})]))
        start = time.perf_counter()
        for ws_id in ws_ids:
            api.send(ws_id, "run something")
        while parked_count(api) < args.turns:
            time.sleep(0.2)
        parked_after = time.perf_counter() - start
        time.sleep(2)
        busy = active_tasks(svc)
        rss_after, threads_after = rss_mib(worker), thread_count(worker)
        service_after = service_rss(svc)
        redis_after = svc.redis.info("memory")["used_memory"]
        start = time.perf_counter()
        for ws_id in ws_ids:
            model.enqueue(Reply(text="done"))
            api.approve(ws_id, approved=True)
        for ws_id in ws_ids:
            api.wait_idle(ws_id, timeout=300)
        drained = time.perf_counter() - start
    print(f"backend: {args.backend}; {args.turns} turns, each parked on one bash call")
    print(f"all parked after                  {parked_after:7.1f} s")
    print(f"worker tasks running while parked {busy:7d}   (slots: 16 threads in the Procfile, 8 here)")
    print(f"worker threads                    {threads_before:7d} before, {threads_after} while parked")
    print(
        f"worker RSS                        {rss_before:7.1f} MiB before, {rss_after:.1f} MiB while parked "
        f"({rss_after - rss_before:+.1f})"
    )
    print(
        f"Redis used memory                 {redis_before / 2**20:7.2f} MiB before, "
        f"{redis_after / 2**20:.2f} MiB while parked"
    )
    added = service_after - service_before + (redis_after - redis_before) / 2**20
    print(
        f"web + worker + beat RSS           {service_before:7.1f} MiB before, "
        f"{service_after:.1f} MiB while parked ({service_after - service_before:+.1f})"
    )
    print(f"added memory per 1,000 parked     {added * 1000 / args.turns:7.1f} MiB (processes and Redis)")
    print(f"approve all -> all idle           {drained:7.1f} s")


if __name__ == "__main__":
    main()
