"""Every metric the processes record themselves, defined once; docs/metrics.md lists them all.

They belong to no registry: `exposition` collects them (or, under PROMETHEUS_MULTIPROC_DIR, the
files every process writes them to). Labels take bounded values only (an outcome, a status, a
tool name from the registry or a configured source, capped in `recording`)."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

from app.metrics import folder

folder.install()  # before the metrics below are made: their values live in this process's files

# Model steps stream a whole answer: a fraction of a second to a few minutes.
MODEL_STEP_BUCKETS = (0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)
# Tool batches run from a file read (milliseconds) to a 600 s command.
TOOL_BATCH_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 600)

TURNS_STARTED = Counter(
    "turnstone_turns_started",
    "Turns that started (left the queue for their first model step).",
    registry=None,
)
TURNS_FINISHED = Counter(
    "turnstone_turns_finished",
    "Turns that ended, by outcome: done, cancelled or error.",
    ["outcome"],
    registry=None,
)
TOOL_CALLS = Counter(
    "turnstone_tool_calls",
    "Tool calls that reached a final state, by tool and outcome "
    "(ok, error, refused, denied, cancelled, interrupted).",
    ["tool", "outcome"],
    registry=None,
)
MODEL_STEP_SECONDS = Histogram(
    "turnstone_model_step_seconds",
    "Time a worker spent on one model step (streaming the answer, storing it, preparing its calls).",
    buckets=MODEL_STEP_BUCKETS,
    registry=None,
)
TOOL_BATCH_SECONDS = Histogram(
    "turnstone_tool_batch_seconds",
    "Time a worker spent on one tool batch (running a model step's approved calls).",
    buckets=TOOL_BATCH_BUCKETS,
    registry=None,
)
MODEL_TOKENS = Counter(
    "turnstone_model_tokens",
    "Tokens the models' providers reported, by model, user (the workstream's owner; operator for the "
    "operator's) and kind (input, output, cache_read, cache_write).",
    ["model", "user", "kind"],
    registry=None,
)
MODEL_COST = Counter(
    "turnstone_model_cost_dollars",
    "What those tokens cost at [prices.MODEL], by model and user (models without a price: 0).",
    ["model", "user"],
    registry=None,
)
MODEL_RETRIES = Counter(
    "turnstone_model_retries",
    "Model requests tried again, by server family and reason (rate_limited, overloaded, "
    "server_error, stalled, connection, broken_stream).",
    ["family", "reason"],
    registry=None,
)
OPEN_WEBSOCKETS = Gauge(
    "turnstone_open_websockets",
    "Websockets open on the web processes (summed over the live ones).",
    registry=None,
    multiprocess_mode="livesum",
)

# Runs (app/jobs) and their webhooks (app/webhooks).
RUNS_ENDED = Counter(
    "turnstone_runs_ended",
    "Runs that ended, by status: succeeded, failed, timed_out, cancelled (counted once, when its end "
    "is recorded for webhooks).",
    ["status"],
    registry=None,
)
WEBHOOK_ATTEMPTS = Counter(
    "turnstone_webhook_attempts",
    "Webhook delivery attempts, by outcome: delivered, retry (failed, tried again later), failed "
    "(failed, given up after a day).",
    ["outcome"],
    registry=None,
)

OWN_METRICS = (
    TURNS_STARTED,
    TURNS_FINISHED,
    TOOL_CALLS,
    MODEL_STEP_SECONDS,
    TOOL_BATCH_SECONDS,
    MODEL_RETRIES,
    OPEN_WEBSOCKETS,
    RUNS_ENDED,
    WEBHOOK_ATTEMPTS,
)
