"""The bash handler: validation and the blocklist at prepare, real subprocesses at execute."""

import contextlib
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from app.settings import ModelSettings, ToolSettings
from app.tools import bash
from app.tools.core.base import ToolContext
from tests.process_table import is_running, live_members, wait_until

ROOT = Path(__file__).resolve().parents[2]


def context(tmp_path, **fields):
    settings = fields.pop("settings", ToolSettings(timeout=20))
    return ToolContext("ws", str(tmp_path), settings=settings, **fields)


def run(tmp_path, command, **args_and_ctx):
    ctx_fields = {
        k: args_and_ctx.pop(k) for k in ("is_cancelled", "emit_output", "settings") if k in args_and_ctx
    }
    ctx = context(tmp_path, **ctx_fields)
    prep = bash.prepare({"command": command, **args_and_ctx}, ctx)
    assert prep.error is None, prep.error
    return bash.execute(prep.args, ctx)


def gone_soon(pid, seconds=0.5):
    """SIGKILL was sent when the call ended; the kernel finishes the exit a moment later."""
    deadline = time.monotonic() + seconds
    while is_running(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


# -- prepare --------------------------------------------------------------------

BLOCKED = [
    ("rm -rf /", "rm -rf /"),
    ("rm -rf /*", "rm -rf /*"),
    ("rm -fr /", "rm -rf /"),
    ("rm -r -f /", "rm -rf /"),
    ("rm -Rf --no-preserve-root /", "rm -rf /"),
    ("sudo rm --recursive --force /", "rm -rf /"),
    ("cd /tmp && rm -rf / ", "rm -rf /"),
    ("mkfs.ext4 /dev/sdb1", "mkfs"),
    ("/sbin/mkfs -t xfs /dev/vdb", "mkfs"),
    ("shutdown -h now", "shutdown"),
    ("sudo reboot", "reboot"),
    ("/sbin/reboot", "reboot"),
    ("halt", "halt"),
    ("systemctl poweroff", "poweroff"),
    ("dd if=/dev/zero of=/dev/sda bs=1M", "of=/dev/<disk>"),
    ("dd if=img of=/dev/nvme0n1", "of=/dev/<disk>"),
    ("dd if=img of=/dev/mmcblk0", "of=/dev/<disk>"),
    ("echo x > /dev/sda", "> /dev/<disk>"),
    ("cat img >/dev/nvme0n1", "> /dev/<disk>"),
    ("cat img > /dev/hda", "> /dev/<disk>"),
    ("cat img > /dev/xvda", "> /dev/<disk>"),
    ("dd if=img of=/dev/md0", "of=/dev/<disk>"),
    ("dd if=img of=/dev/md/data", "of=/dev/<disk>"),
    ("dd if=img of=/dev/dm-0", "of=/dev/<disk>"),
    ("dd if=img of=/dev/loop0", "of=/dev/<disk>"),
    ("dd if=img of=/dev/disk/by-id/ata-X", "of=/dev/<disk>"),
    ("dd if=img of=/dev/mapper/root", "of=/dev/<disk>"),
    ('dd if=img of="/dev/sda"', "of=/dev/<disk>"),
    ("cat img > /dev/md0", "> /dev/<disk>"),
    ("cat img >/dev/dm-3", "> /dev/<disk>"),
    ("cat img > /dev/loop7", "> /dev/<disk>"),
    ("cat img > /dev/disk/by-uuid/1234-abcd", "> /dev/<disk>"),
    ("cat img >| /dev/mapper/vg-home", "> /dev/<disk>"),
    ("cat img > '/dev/nvme0n1'", "> /dev/<disk>"),
    ("cat img | tee /dev/mapper/vg-root", "tee /dev/<disk>"),
    ("cat img | tee '/dev/disk/by-label/My Disk'", "tee /dev/<disk>"),
    ("cp disk.img /dev/loop0", "cp /dev/<disk>"),
    ("cp disk.img /dev/md127", "cp /dev/<disk>"),
    (":(){ :|:& };:", ":(){ :|:& };:"),
    (": () { : | : & } ; :", ":(){ :|:& };:"),
    ("bomb(){ bomb|bomb& }; bomb", ":(){ :|:& };:"),
    ("mv / /tmp/old", "mv /"),
    ("chmod -R 777 /", "chmod -R 777 /"),
    ("cat /proc/self/environ", "/proc/*/environ"),
    ("tr '\\0' '\\n' < /proc/1/environ", "/proc/*/environ"),
    ("cat img | sudo tee /dev/sdb > /dev/null", "tee /dev/<disk>"),
    ("cp disk.img /dev/nvme0n1", "cp /dev/<disk>"),
    ("r\x00m -rf /", "rm -rf /"),
]

SAFE = [
    "rm -rf /tmp/x",
    "rm -rf ./build",
    "rm -f /tmp/a.txt",
    "rm -rf build/ dist/",
    "ls /",
    "chmod -r /tmp/file",
    "chmod -R 755 ./dist",
    "mv ./a /tmp/b",
    "dd if=/dev/sda of=disk.img",
    "echo hi > /dev/null",
    "cat /proc/cpuinfo",
    "grep -r halt_on_error .",
    "cat shutdown.log",
    "cat /var/log/reboot",
    "pip install mkfs-docs-tool",
    "f() { echo hi; }; f",
    "cp /dev/sda disk.img",
    "dd if=/dev/md0 of=backup.img",
    "dd if=/dev/mapper/root of=root.img bs=4M",
    "cat /dev/loop0 > loop.img",
    "ls -l /dev/disk/by-id/",
    "losetup -a > loops.txt",
    "echo hi > /dev/stderr",
    "cat /dev/mapper/control",
    "make 2>&1 | tee build.log",
]


@pytest.mark.parametrize(("command", "pattern"), BLOCKED)
def test_dangerous_command_is_blocked_without_a_prompt(tmp_path, command, pattern):
    prep = bash.prepare({"command": command}, context(tmp_path))
    assert prep.error == f"Blocked: command matches dangerous pattern '{pattern}'"
    assert prep.needs_approval is False


@pytest.mark.parametrize(
    ("command", "pattern"),
    [
        ("echo " + "word " * 20_000, None),  # each word once the program, the rest its arguments
        ("echo " + "\\" * 50_000, None),  # one long run of characters a function name may hold
        ("rm " * 20_000 + "-rf /", "rm -rf /"),
        ("echo " + "\\" * 50_000 + "; :(){ :|:& };:", ":(){ :|:& };:"),
    ],
)
def test_the_blocklist_reads_a_long_command_in_one_pass(command, pattern):
    # A model (or what it read) can send a command of any length; checking it at prepare, in
    # the model step, took seconds in the square of its length. A margin, not a benchmark.
    started = time.monotonic()
    assert bash.blocked_pattern(command) == pattern
    assert time.monotonic() - started < 2


@pytest.mark.parametrize("command", SAFE)
def test_near_miss_command_is_accepted(tmp_path, command):
    prep = bash.prepare({"command": command}, context(tmp_path))
    assert prep.error is None
    assert prep.needs_approval is True


@pytest.mark.parametrize("command", [None, "", "   \n", 42, ["ls"]])
def test_command_must_be_a_non_empty_string(tmp_path, command):
    prep = bash.prepare({"command": command}, context(tmp_path))
    assert prep.error == "Error: bash needs a non-empty 'command' string"


@pytest.mark.parametrize(("given", "clamped"), [(0, 1), (-5, 1), (30, 30), (1000, 600), (45.0, 45)])
def test_timeout_is_clamped(tmp_path, given, clamped):
    prep = bash.prepare({"command": "ls", "timeout": given}, context(tmp_path))
    assert prep.args["timeout"] == clamped


@pytest.mark.parametrize("timeout", [True, "30", 2.5, [30]])
def test_timeout_must_be_a_whole_number(tmp_path, timeout):
    prep = bash.prepare({"command": "ls", "timeout": timeout}, context(tmp_path))
    assert prep.error == "Error: 'timeout' must be a whole number of seconds"


def test_stop_on_error_must_be_a_boolean(tmp_path):
    prep = bash.prepare({"command": "ls", "stop_on_error": "yes"}, context(tmp_path))
    assert prep.error == "Error: 'stop_on_error' must be true or false"


def test_header_is_the_first_line_and_preview_the_whole_command(tmp_path):
    prep = bash.prepare({"command": "cd src\nmake test", "timeout": 60}, context(tmp_path))
    assert prep.header == "$ cd src ..."
    assert prep.preview == "cd src\nmake test\n(timeout: 60 s)"


# -- execute --------------------------------------------------------------------


def test_stdout_is_returned(tmp_path):
    assert run(tmp_path, "echo hello").output == "hello"


def test_stdout_streams_before_the_command_ends(tmp_path):
    seen = []
    outcome = run(
        tmp_path, "echo a; sleep 1; echo b", emit_output=lambda line: seen.append((time.monotonic(), line))
    )
    finished = time.monotonic()
    assert [line for _, line in seen] == ["a\n", "b\n"]
    assert finished - seen[0][0] > 0.7
    assert outcome.output == "a\nb"


def test_stderr_lines_follow_stdout_with_a_prefix(tmp_path):
    outcome = run(tmp_path, "echo err1 >&2; echo out; echo err2 >&2")
    assert outcome.output == "out\n[stderr] err1\n[stderr] err2"


def test_stderr_is_not_streamed(tmp_path):
    seen = []
    run(tmp_path, "echo err >&2", emit_output=seen.append)
    assert seen == []


def test_stderr_redirected_to_stdout_has_no_prefix(tmp_path):
    assert run(tmp_path, "ls /no/such/path 2>&1").output.startswith("ls: ")
    assert "[stderr]" not in run(tmp_path, "ls /no/such/path 2>&1").output


def test_no_output_says_so(tmp_path):
    assert run(tmp_path, "true").output == "(no output)"


def test_exit_code_1_is_reported_but_not_an_error(tmp_path):
    outcome = run(tmp_path, "grep nothing /dev/null")
    assert outcome.output == "(no output)\n[exit code: 1]"
    assert outcome.is_error is False


def test_exit_code_2_or_more_is_an_error(tmp_path):
    outcome = run(tmp_path, "echo partial; exit 2")
    assert outcome.output == "partial\n[exit code: 2]"
    assert outcome.is_error is True


def test_a_signal_is_an_error(tmp_path):
    outcome = run(tmp_path, "kill -KILL $$")
    assert outcome.output.endswith("[killed by signal SIGKILL]")
    assert outcome.is_error is True


def test_pipefail_reports_a_failure_inside_a_pipeline(tmp_path):
    assert run(tmp_path, "exit 3 | cat").output.endswith("[exit code: 3]")


def test_stop_on_error_stops_at_the_first_failure(tmp_path):
    outcome = run(tmp_path, "echo one; false; echo two", stop_on_error=True)
    assert outcome.output == "one\n[exit code: 1]"
    assert outcome.is_error is True


def test_without_stop_on_error_the_script_carries_on(tmp_path):
    assert run(tmp_path, "false; echo two").output == "two"


def test_commands_run_in_the_working_directory(tmp_path):
    assert run(tmp_path, "pwd").output == str(tmp_path)


def test_stdin_is_empty(tmp_path):
    assert run(tmp_path, "cat; echo done", timeout=5).output == "done"


def test_secrets_are_scrubbed_from_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("MY_API_KEY", "sk-test-0123456789")
    monkeypatch.setenv("DATABASE_URL", "postgresql://app:pw12345678@db/app")
    monkeypatch.setenv("HARMLESS_SETTING", "kept")
    output = run(tmp_path, "env").output
    assert "MY_API_KEY" not in output and "DATABASE_URL" not in output
    assert f"PATH={os.environ['PATH']}" in output
    assert "HARMLESS_SETTING=kept" in output


def test_a_secret_printed_another_way_is_redacted(tmp_path, monkeypatch):
    monkeypatch.setenv("MY_API_KEY", "sk-test-0123456789")
    seen = []
    outcome = run(
        tmp_path, "echo key=sk-test-0123456789; echo sk-test-0123456789 >&2", emit_output=seen.append
    )
    assert outcome.output == "key=[redacted]\n[stderr] [redacted]"
    assert seen == ["key=[redacted]\n"]


def test_a_secret_printed_in_two_writes_is_redacted_in_the_stream_and_the_result(tmp_path, monkeypatch):
    # The pause puts the halves in two reads of the pipe: each half alone is no secret.
    monkeypatch.setenv("MY_API_KEY", "sk-test-0123456789")
    seen = []
    command = "printf 'key=sk-test-01'; sleep 0.3; printf '23456789 end\\nnext\\n'"
    outcome = run(tmp_path, command, emit_output=seen.append)
    assert outcome.output == "key=[redacted] end\nnext"
    assert "".join(seen) == "key=[redacted] end\nnext\n"
    assert not any("sk-test" in piece or "23456789" in piece for piece in seen)


def test_many_lines_are_emitted_in_a_few_pieces_whole_and_in_order(tmp_path):
    seen = []
    outcome = run(tmp_path, "seq 1 100000", emit_output=seen.append)
    assert "".join(seen) == "".join(f"{n}\n" for n in range(1, 100_001))
    assert len(seen) < 1000  # pieces as the pipe delivered them, not a call per line
    assert outcome.output.startswith("1\n2\n")


def test_timeout_kills_the_process_group_with_a_background_child(tmp_path):
    started = time.monotonic()
    outcome = run(tmp_path, "sleep 300 & echo $!; echo started; sleep 300", timeout=1)
    assert time.monotonic() - started < 4
    child = int(outcome.output.splitlines()[0])
    assert gone_soon(child)
    assert "started" in outcome.output
    assert "[timed out after 1 s and was stopped; its outcome is unknown" in outcome.output
    assert outcome.is_error is True


def test_the_settings_timeout_applies_when_the_call_gives_none(tmp_path):
    outcome = run(tmp_path, "sleep 30", settings=ToolSettings(timeout=1))
    assert "[timed out after 1 s" in outcome.output


def test_cancel_stops_a_running_command_within_a_second(tmp_path):
    cancel_at = time.monotonic() + 0.3
    outcome = run(tmp_path, "echo begun; sleep 30", is_cancelled=lambda: time.monotonic() >= cancel_at)
    assert time.monotonic() - cancel_at < 1.0
    assert outcome.output.startswith("begun\n[cancelled and stopped; its outcome is unknown")
    assert outcome.is_error is True


def test_background_children_do_not_outlive_the_call(tmp_path):
    started = time.monotonic()
    outcome = run(tmp_path, "sleep 300 & echo $!")
    assert time.monotonic() - started < 3
    assert gone_soon(int(outcome.output))
    assert outcome.is_error is False


def test_a_child_that_escapes_the_group_does_not_hang_the_call(tmp_path):
    started = time.monotonic()
    outcome = run(tmp_path, "setsid sleep 30 & echo $!")
    try:
        assert time.monotonic() - started < 4
        assert outcome.output.splitlines()[0].isdigit()
    finally:
        os.kill(int(outcome.output.splitlines()[0]), signal.SIGKILL)


def test_an_unfinished_last_line_is_kept_when_an_escaped_child_holds_the_pipe(tmp_path, monkeypatch):
    # The redactor holds an unfinished line's tail (a secret could still complete it) until the
    # stream ends; here it never does, and the tail must not be lost with it.
    monkeypatch.setenv("MY_API_KEY", "sk-test-0123456789abcdefghijklmnopqrstuvwxyz")
    seen = []
    command = "setsid sleep 30 & echo $!; printf 'last words, no newline'"
    outcome = run(tmp_path, command, emit_output=seen.append)
    try:
        assert outcome.output.endswith("\nlast words, no newline")
        assert "".join(seen).endswith("\nlast words, no newline")
    finally:
        os.kill(int(outcome.output.splitlines()[0]), signal.SIGKILL)


def test_an_escaped_child_can_still_write_once_the_call_is_over(tmp_path):
    # Its output is no one's any more, but closing the pipe under it would kill it (SIGPIPE) at
    # its next line: the pipe is drained, and dropped, until it closes it.
    marker = tmp_path / "still-alive"
    escape = f"setsid sh -c 'sleep 3; echo late; seq 1 20000; echo $$ > {marker}; sleep 30' &"
    command = f"{escape} sleep 0.5; echo started"  # escaped before the call's group is killed
    outcome = run(tmp_path, command)
    assert outcome.output == "started"
    deadline = time.monotonic() + 10
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert marker.exists(), "the escaped child died writing to the call's pipe"
    os.kill(int(marker.read_text()), signal.SIGKILL)


def test_a_call_reads_its_pipes_without_threads_and_closes_them(tmp_path):
    # Two reader threads a call cost more to start than the rest of an `echo`'s start.
    threads_during: list[int] = []
    fds_before = len(os.listdir("/proc/self/fd"))
    outcome = run(
        tmp_path,
        "echo one; sleep 0.2; echo two >&2; echo three",
        emit_output=lambda text: threads_during.append(threading.active_count()),
    )
    assert outcome.output == "one\nthree\n[stderr] two"
    assert threads_during and set(threads_during) == {threading.active_count()}
    assert len(os.listdir("/proc/self/fd")) == fds_before


def test_output_read_many_lines_at_a_time_keeps_a_bounded_tail_starting_at_a_line(tmp_path):
    # 220,000 bytes written at once reach the reader in pipe-sized pieces of many lines each:
    # what is kept is still bounded (as in the test below), not a whole piece for a tail.
    settings = ToolSettings(timeout=20, truncation=1024)
    command = "python3 -c \"import sys; sys.stdout.write('0123456789\\n' * 20000)\"; echo END"
    kept = bash.run(command, 20, context(tmp_path, settings=settings)).text
    assert len(kept) < 9 * 1024  # 4 x truncation, and the gap's note
    head, _, tail = kept.partition(" characters not kept ...]\n")
    assert head.startswith("0123456789\n") and tail.startswith("0123456789\n")
    assert tail.endswith("0123456789\nEND")


def test_a_tail_of_long_lines_is_kept_whole_not_cut_back_to_a_line_start(tmp_path):
    # Lines longer than the tail the capture keeps: cutting at the next line's start would
    # leave the last line alone, or nothing, for the result's tail.
    settings = ToolSettings(timeout=20, truncation=1024)
    command = "python3 -c \"import sys; sys.stdout.write(('a' * 5000 + '\\n') * 300)\"; echo END"
    done = bash.run(command, 20, context(tmp_path, settings=settings))
    assert len(done.pieces[-1]) >= 1024 and done.pieces[-1].endswith("a\nEND")
    outcome = run(tmp_path, command, settings=settings)
    assert outcome.output.endswith("a" * (512 - 4) + "\nEND")


def test_huge_output_is_bounded_in_memory_and_its_one_notice_counts_all_that_was_cut(tmp_path):
    settings = ToolSettings(timeout=20, truncation=1024)
    outcome = run(tmp_path, "yes 0123456789 | head -c 5000000; echo; echo END", settings=settings)
    whole = ("0123456789\n" * 500_000)[:5_000_000] + "\nEND"
    assert outcome.output == (
        whole[:512] + f"\n\n[... {len(whole) - 1024:,} characters cut from the middle of this output ...]\n\n"
        + whole[-512:]
    )  # fmt: skip


def test_a_missing_working_directory_is_an_error(tmp_path):
    ctx = ToolContext("ws", str(tmp_path / "gone"))
    outcome = bash.execute({"command": "pwd", "stop_on_error": False}, ctx)
    assert outcome.is_error and "does not exist" in outcome.output


# -- more of the spec and RESOLUTIONS -------------------------------------------


def test_windows_line_endings_are_made_unix(tmp_path):
    (tmp_path / "sub").mkdir()
    prep = bash.prepare({"command": "cd sub\r\npwd\r\n"}, context(tmp_path))
    assert prep.args["command"] == "cd sub\npwd\n"
    assert bash.execute(prep.args, context(tmp_path)).output == str(tmp_path / "sub")


def test_preview_notes_stop_on_error(tmp_path):
    prep = bash.prepare({"command": "make", "stop_on_error": True}, context(tmp_path))
    assert prep.preview == "make\n(stop on error)"
    assert prep.args == {"command": "make", "stop_on_error": True}


def test_an_omitted_timeout_is_left_to_the_setting(tmp_path):
    prep = bash.prepare({"command": "ls"}, context(tmp_path))
    assert "timeout" not in prep.args and prep.args["stop_on_error"] is False


def test_exit_code_follows_stdout_and_stderr(tmp_path):
    outcome = run(tmp_path, "echo out; echo err >&2; exit 3")
    assert outcome.output == "out\n[stderr] err\n[exit code: 3]"
    assert outcome.is_error is True


def test_stop_on_error_with_a_clean_run_is_not_an_error(tmp_path):
    outcome = run(tmp_path, "echo fine", stop_on_error=True)
    assert outcome.output == "fine" and outcome.is_error is False


def test_a_terminating_signal_is_an_error_that_keeps_earlier_output(tmp_path):
    outcome = run(tmp_path, "echo before; kill -TERM $$")
    assert outcome.output == "before\n[killed by signal SIGTERM]"
    assert outcome.is_error is True


def test_cancel_kills_the_process_group(tmp_path):
    cancel_at = time.monotonic() + 0.5
    outcome = run(
        tmp_path, "sleep 300 & echo $!; sleep 30", is_cancelled=lambda: time.monotonic() >= cancel_at
    )
    assert "[cancelled and stopped" in outcome.output
    assert gone_soon(int(outcome.output.splitlines()[0]))


def test_timeout_keeps_partial_stderr_too(tmp_path):
    outcome = run(tmp_path, "echo half-done >&2; sleep 30", timeout=1)
    assert outcome.output.startswith("[stderr] half-done\n[timed out after 1 s")


def test_the_model_api_key_is_scrubbed_whatever_its_variable(tmp_path, monkeypatch):
    monkeypatch.setenv("LLM_AUTH", "sk-model-0123456789")
    model = ModelSettings("default", "openai", "m", api_key="sk-model-0123456789")
    ctx = context(tmp_path, model=model)
    prep = bash.prepare({"command": "env; echo sk-model-0123456789"}, ctx)
    outcome = bash.execute(prep.args, ctx)
    assert "LLM_AUTH" not in outcome.output and "sk-model" not in outcome.output
    assert outcome.output.endswith("[redacted]")


def test_a_secret_at_the_edge_of_the_kept_output_is_redacted_whole(tmp_path, monkeypatch):
    # 1,024 characters of truncation keep 2,048 of stdout's head: the secret straddles that edge.
    monkeypatch.setenv("MY_API_KEY", "sk-edge-0123456789abcdef")
    settings = ToolSettings(timeout=20, truncation=1024)
    command = "printf 'x%.0s' $(seq 2040); echo sk-edge-0123456789abcdef; yes | head -c 50000"
    kept = bash.run(command, 20, context(tmp_path, settings=settings)).text
    assert "characters not kept" in kept
    assert "sk-edge" not in kept


# -- when the worker dies, or cannot stream ---------------------------------------

# A stand-in for a Celery worker: one bash call on a pool thread, its output streamed to stdout.
WORKER = """
import sys, threading
from app.settings import ToolSettings
from app.tools import bash
from app.tools.core.base import ToolContext
emit = lambda text: print(text, end="", flush=True)
ctx = ToolContext("ws", sys.argv[1], settings=ToolSettings(timeout=60), emit_output=emit)
call = threading.Thread(target=bash.execute, args=({"command": sys.argv[2], "stop_on_error": False}, ctx))
call.start()
call.join()
"""


def test_a_command_is_stopped_when_its_worker_is_killed(tmp_path):
    worker = subprocess.Popen(
        [sys.executable, "-c", WORKER, str(tmp_path), "echo $$; sleep 2 & sleep 2; touch finished"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert worker.stdout is not None
    pgid = int(worker.stdout.readline())
    worker.kill()  # SIGKILL: nothing runs in the worker after this
    worker.wait()
    try:
        # Once no process of the group runs, nothing can create the file any more.
        assert wait_until(lambda: not live_members(pgid), 10), live_members(pgid)
        assert not (tmp_path / "finished").exists()
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGKILL)


def failing_sink(fail_times=None):
    """An output sink that raises (as a Redis publish during an outage does), then maybe recovers."""
    seen = []

    def emit(text):
        if fail_times is None or len(seen) < fail_times:
            seen.append(None)
            raise ConnectionError("publish failed")
        seen.append(text)

    return emit, seen


def test_a_sink_that_always_fails_neither_stops_nor_fails_the_command(tmp_path, caplog):
    emit, _seen = failing_sink()
    with caplog.at_level(logging.WARNING, logger="app.tools.bash"):
        outcome = run(
            tmp_path, "echo one; echo two; sleep 0.1; echo three > file; echo four", emit_output=emit
        )
    assert outcome.output == "one\ntwo\nfour"
    assert outcome.is_error is False
    assert (tmp_path / "file").read_text() == "three\n"
    assert len([r for r in caplog.records if "could not be streamed" in r.getMessage()]) == 1


def test_streaming_carries_on_once_the_sink_recovers(tmp_path):
    emit, seen = failing_sink(fail_times=1)
    outcome = run(tmp_path, "echo one; sleep 0.1; echo two", emit_output=emit)
    assert seen == [None, "two\n"]
    assert outcome.output == "one\ntwo"
