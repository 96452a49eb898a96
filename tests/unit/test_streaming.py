"""The coalescer: few events, never late, nothing lost."""

from __future__ import annotations

import threading
import time

from app.engine.streaming import Coalescer


class Sink:
    def __init__(self) -> None:
        self.flushes: list[tuple[float, str]] = []
        self.event = threading.Event()

    def __call__(self, text: str) -> None:
        self.flushes.append((time.monotonic(), text))
        self.event.set()


def test_text_after_a_quiet_spell_goes_out_at_once():
    sink = Sink()
    c = Coalescer(sink, interval=0.5)
    c.add("first")
    assert [t for _, t in sink.flushes] == ["first"]
    c.close()


def test_a_burst_of_lines_becomes_a_few_flushes_and_loses_nothing():
    sink = Sink()
    c = Coalescer(sink, interval=0.025)
    lines = [f"line {n}\n" for n in range(2000)]
    for line in lines:
        c.add(line)
    c.close()
    assert "".join(t for _, t in sink.flushes) == "".join(lines)
    assert len(sink.flushes) < 20


def test_max_chars_flushes_without_waiting():
    sink = Sink()
    c = Coalescer(sink, interval=10, max_chars=100)
    c.add("x")  # immediate: nothing flushed before
    c.add("y" * 50)
    assert len(sink.flushes) == 1
    c.add("z" * 60)
    assert len(sink.flushes) == 2 and sink.flushes[1][1] == "y" * 50 + "z" * 60
    c.close()


def test_held_text_is_flushed_by_the_timer_within_the_interval():
    sink = Sink()
    c = Coalescer(sink, interval=0.05)
    c.add("a")
    sink.event.clear()
    added = time.monotonic()
    c.add("b")
    assert sink.event.wait(1)
    assert sink.flushes[-1][1] == "b" and sink.flushes[-1][0] - added < 0.5
    c.close()


def test_close_flushes_what_is_pending():
    sink = Sink()
    c = Coalescer(sink, interval=10)
    c.add("a")
    c.add("b")
    c.close()
    assert "".join(t for _, t in sink.flushes) == "ab"
