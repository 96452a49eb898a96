"""A turn's next phase runs in the task that handed it on, where that worker consumes its queue
(app/engine/running/chain.py): which worker received which task is read from the workers' own logs."""

from __future__ import annotations

from app.taskqueue import MODEL_STEP_TASK, TOOL_BATCH_TASK
from tests.fakes.model_server import Reply, ToolCall


def bash_turn(model, command: str, answer: str) -> None:  # type: ignore[no-untyped-def]
    model.enqueue(Reply(tool_calls=[ToolCall("bash", {"command": command})]))
    model.enqueue(Reply(text=answer))


def test_an_auto_approved_bash_turn_runs_whole_in_the_task_that_began_it(
    api, model, services, open_socket, workdir
):
    ws_id = api.create_workstream(working_dir=str(workdir), auto_approve=True)
    sock = open_socket(ws_id)
    steps, batches = (
        services.tasks_received("worker", MODEL_STEP_TASK),
        services.tasks_received("worker", TOOL_BATCH_TASK),
    )
    bash_turn(model, "echo hello", "it said hello")
    turn_id = api.send(ws_id, "say hello")
    sock.wait_turn_end(turn_id)
    assert sock.of_type("tool_result")[-1]["output"].strip() == "hello"
    assert api.history(ws_id)[-1]["content"] == "it said hello"
    # One task off the queue for the whole turn: its batch and second step were not sent.
    assert services.tasks_received("worker", MODEL_STEP_TASK) - steps == 1
    assert services.tasks_received("worker", TOOL_BATCH_TASK) - batches == 0


def test_workers_split_by_queue_send_each_other_the_phases_they_do_not_take(
    api, model, services, open_socket, workdir
):
    services.kill("worker")
    services.start_worker("models", queues="model_steps,control")
    services.start_worker("tools", queues="tool_batches,control")
    try:
        ws_id = api.create_workstream(working_dir=str(workdir), auto_approve=True)
        sock = open_socket(ws_id)
        steps = services.tasks_received("models", MODEL_STEP_TASK)
        batches = services.tasks_received("tools", TOOL_BATCH_TASK)
        bash_turn(model, "echo split", "it said split")
        turn_id = api.send(ws_id, "say split")
        sock.wait_turn_end(turn_id)
        assert sock.of_type("tool_result")[-1]["output"].strip() == "split"
        assert api.history(ws_id)[-1]["content"] == "it said split"
        assert services.tasks_received("models", MODEL_STEP_TASK) - steps == 2  # the first and the last
        assert services.tasks_received("tools", TOOL_BATCH_TASK) - batches == 1
        assert services.tasks_received("tools", MODEL_STEP_TASK) == 0
        assert services.tasks_received("models", TOOL_BATCH_TASK) == 0
    finally:
        services.kill("models")
        services.kill("tools")


def test_a_worker_shutting_down_sends_the_next_step_instead_of_running_it(
    api, model, services, open_socket, workdir
):
    ws_id = api.create_workstream(working_dir=str(workdir), auto_approve=True)
    sock = open_socket(ws_id)
    bash_turn(model, "echo started; sleep 2; echo slept", "it slept")
    turn_id = api.send(ws_id, "sleep a little")
    sock.wait_type("tool_output_chunk")
    steps = services.tasks_received("worker", MODEL_STEP_TASK)
    # A deploy stops the worker mid-command: it finishes the batch, and leaves the rest of
    # the turn to the queue rather than holding its shutdown for it.
    services.stop_gracefully("worker")
    assert sock.wait_type("tool_result")["output"].strip() == "started\nslept"
    services.start_worker()
    sock.wait_turn_end(turn_id)
    assert api.history(ws_id)[-1]["content"] == "it slept"
    assert services.tasks_received("worker", MODEL_STEP_TASK) - steps == 1  # the new worker took it
