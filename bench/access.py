"""What users and scopes cost a request: a GET answered with the operator's environment token,
with a user's stored token (one indexed lookup joined to the user), a user's list filtered to
their own workstreams, a sign-in (argon2id), and a refused request (no token).

Run: python -m bench.access [--requests N] [--backend sqlite|postgresql]. Prints figures; asserts
nothing. The service is the tests' (gunicorn, SQLite or PostgreSQL), on this machine.
"""

from __future__ import annotations

import argparse
import time

import httpx

from bench.harness import ms_summary, running_service
from tests.integration.people import PASSWORD, People


def timed(client: httpx.Client, method: str, path: str, n: int, **kw: object) -> list[float]:
    out = []
    for _ in range(n):
        start = time.perf_counter()
        client.request(method, path, **kw)  # type: ignore[arg-type]
        out.append(time.perf_counter() - start)
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--backend", default="sqlite")
    args = parser.parse_args()
    with running_service(args.backend) as (svc, api, _model):
        people = People(svc)
        alice = people.user("alice")
        for i in range(20):  # others' workstreams the filter must pass over
            api.create_workstream(name=f"operator {i}", working_dir=str(svc.workdir))
        alice.api(svc).create_workstream(name="hers", working_dir=str(svc.workdir))
        n = args.requests
        with httpx.Client(base_url=svc.base_url, timeout=30) as c:
            env = {"Authorization": f"Bearer {api.token}"}
            user = {"Authorization": f"Bearer {alice.tokens['all']}"}
            timed(c, "GET", "/v1/api/me", 20, headers=env)  # warm-up
            print(f"access costs on {args.backend}:")
            print(
                ms_summary(
                    "GET /v1/api/me, operator env token", timed(c, "GET", "/v1/api/me", n, headers=env)
                )
            )
            print(
                ms_summary(
                    "GET /v1/api/me, user's stored token", timed(c, "GET", "/v1/api/me", n, headers=user)
                )
            )
            print(
                ms_summary(
                    "GET /v1/api/workstreams, operator (21)",
                    timed(c, "GET", "/v1/api/workstreams", n, headers=env),
                )
            )
            print(
                ms_summary(
                    "GET /v1/api/workstreams, user (own 1 of 21)",
                    timed(c, "GET", "/v1/api/workstreams", n, headers=user),
                )
            )
            print(ms_summary("GET /v1/api/me, no token (401)", timed(c, "GET", "/v1/api/me", n)))
            login = {"username": alice.name, "password": PASSWORD}
            print(
                ms_summary("POST /v1/api/login (argon2id)", timed(c, "POST", "/v1/api/login", 20, json=login))
            )


if __name__ == "__main__":
    main()
