"""How many worker slots and how much memory 200 turns parked for approval use.

Run: python -m bench.parked_turns [--turns 200] [--backend sqlite|postgresql]
"""

from __future__ import annotations

import argparse
import time

from bench.harness import rss_mib, running_service, thread_count
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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--backend", default="sqlite", choices=["sqlite", "postgresql"])
    args = parser.parse_args()
    with running_service(args.backend) as (svc, api, model):
        worker = svc.processes["worker"].pid
        time.sleep(1)
        rss_before, threads_before = rss_mib(worker), thread_count(worker)
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
    print(f"approve all -> all idle           {drained:7.1f} s")


if __name__ == "__main__":
    main()
