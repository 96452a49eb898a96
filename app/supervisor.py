"""`turnstone-jobs run`'s one supervisor: the Procfile's services started directly, their output
prefixed, stopped in order on Ctrl-C (services first, the private Redis last).

The command line process execs into `python -S .../app/supervisor.py SPEC` once it has set the
run up, so the supervisor holds nothing but a few modules of the standard library (no site
packages, no dataclasses: each is a few hundred KiB of a process that lives as long as the run).
Every service gets a process group of its own, so a Ctrl-C at the terminal reaches the
supervisor alone, which then asks each service to stop as it would stop in a deploy
(SIGTERM: gunicorn's graceful stop, Celery's warm shutdown, which lets a running call finish).
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import shutil
import signal
import subprocess
import sys
import time

PR_SET_PDEATHSIG = 1  # prctl(2): the signal a process gets when its parent dies (Linux)


class Service:
    def __init__(self, name: str, process: subprocess.Popen[bytes]) -> None:
        self.name = name
        self.process = process
        self.pending = b""  # a line not yet ended
        self.reported = False  # its end said


class Supervisor:
    """The services of one run; `stopping` counts the stop requests (signals) received."""

    def __init__(self) -> None:
        self.services: list[Service] = []
        self.width = 0
        self.stopping = 0
        self.returncode = 0

    def start(self, name: str, command: str, cwd: str) -> None:
        process = subprocess.Popen(
            ["/bin/sh", "-c", command],
            cwd=cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own group: the terminal's Ctrl-C is for the supervisor
            preexec_fn=die_with_parent,
        )
        self.services.append(Service(name, process))
        self.width = max(self.width, len(name))
        self.say(name, f"started with pid {process.pid}")

    def say(self, name: str, text: str) -> None:
        self.write(name, text.encode() + b"\n")

    def write(self, name: str, line: bytes) -> None:
        stamp = time.strftime("%H:%M:%S").encode()
        # A terminal closed under the run (its SIGHUP stops the services) must not stop the
        # supervision itself: what cannot be shown is dropped.
        with contextlib.suppress(OSError):
            sys.stdout.buffer.write(stamp + b" " + name.ljust(self.width).encode() + b" | " + line)
            sys.stdout.buffer.flush()

    def ask_to_stop(self, signum: int = 0, frame: object = None) -> None:
        self.stopping += 1
        if self.stopping == 1:
            self.say("run", "stopping: each service finishes what it is doing (Ctrl-C again: at once)")
            self.signal_all(signal.SIGTERM)
        elif self.stopping == 2:
            self.say("run", "stopping at once: a running tool call is killed and reported interrupted")
            self.signal_all(signal.SIGKILL)

    def signal_all(self, signum: int) -> None:
        for service in self.services:
            if service.process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(service.process.pid, signum)

    def loop(self) -> int:
        """Until every service has ended (a process a service left behind, holding its output
        open, does not keep the run going)."""
        selector = selectors.DefaultSelector()
        for service in self.services:
            assert service.process.stdout is not None
            os.set_blocking(service.process.stdout.fileno(), False)
            selector.register(service.process.stdout, selectors.EVENT_READ, service)
        while any(not s.reported for s in self.services):
            for key, _ in selector.select(timeout=0.5):
                if not self.read(key.data):
                    selector.unregister(key.fileobj)
            self.reap()
        selector.close()
        return self.returncode

    def read(self, service: Service) -> bool:
        """What the service has written so far; False once its output is closed."""
        assert service.process.stdout is not None
        while True:
            try:
                chunk = os.read(service.process.stdout.fileno(), 65536)
            except BlockingIOError:
                return True
            except OSError:
                chunk = b""
            if not chunk:
                self.flush(service, ended=True)
                return False
            service.pending += chunk
            self.flush(service)

    def flush(self, service: Service, ended: bool = False) -> None:
        *lines, service.pending = service.pending.split(b"\n")
        if ended and service.pending:
            lines.append(service.pending)
            service.pending = b""
        for line in lines:
            self.write(service.name, line + b"\n")

    def reap(self) -> None:
        """Says which services ended; one that ended on its own ends the run (the others are
        asked to stop) and gives it its exit status."""
        for service in self.services:
            code = service.process.poll()
            if code is None or service.reported:
                continue
            if service.process.stdout is not None and not service.process.stdout.closed:
                self.read(service)  # its last words before its end
                self.flush(service, ended=True)
            service.reported = True
            self.say(service.name, f"stopped (exit status {code})")
            if not self.stopping:
                self.returncode = code or 1
                self.ask_to_stop()


def die_with_parent() -> None:
    """A service outlives no supervisor killed outright (its group would be left running)."""
    import ctypes

    with contextlib.suppress(OSError, AttributeError):  # not Linux: left to the operator
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def stop_redis(pid: int, folder: str) -> None:
    """The private Redis, last: the services have finished with it."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 5
    try:
        while time.monotonic() < deadline:
            done, _ = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            time.sleep(0.05)
        else:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
    except ChildProcessError:
        pass  # already gone and reaped
    shutil.rmtree(folder, ignore_errors=True)


def main(spec_text: str) -> int:
    """SPEC: {"processes": [[name, command]], "cwd", "redis": {"pid", "folder"} or null,
    "scratch": a folder to remove, "record": the run's record to remove}."""
    spec = json.loads(spec_text)
    supervisor = Supervisor()
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, supervisor.ask_to_stop)
    try:
        supervisor.width = max([len(n) for n, _ in spec["processes"]] + [3])
        for name, command in spec["processes"]:
            if not supervisor.stopping:  # a Ctrl-C already: start nothing more
                supervisor.start(name, command, spec["cwd"])
        code = supervisor.loop()
    finally:
        redis = spec.get("redis")
        if redis:
            stop_redis(int(redis["pid"]), redis["folder"])
            supervisor.say("run", "stopped the private Redis")
        shutil.rmtree(spec["scratch"], ignore_errors=True)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(spec["record"])
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
