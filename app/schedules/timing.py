"""When a schedule fires: a cron expression read by cronsim (maintained, small, timezone-aware,
DST handled as cron does) in the schedule's timezone, or a fixed interval."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

MAX_CRON_CHARS = 200
CRON_FIELDS = 5
SHOWN_FIRE_TIMES = 5


class TimingError(ValueError):
    """A cron expression, interval or timezone that cannot be used; the message says why."""


def zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise TimingError(f"timezone: {name[:64]!r} is not an IANA timezone (e.g. Europe/Berlin)") from None


def check_cron(expression: str, timezone: str) -> None:
    """TimingError unless `expression` is a cron expression that ever fires."""
    next_after(expression, None, timezone, datetime.now(UTC))


def next_after(cron: str | None, every_s: int | None, timezone: str, after: datetime) -> datetime:
    """The first fire time strictly after `after` (UTC)."""
    if every_s is not None:
        return after + timedelta(seconds=every_s)
    assert cron is not None
    if len(cron.split()) != CRON_FIELDS:  # a sixth (seconds) field would fire every second
        raise TimingError(f"cron: expected {CRON_FIELDS} fields (minute hour day month weekday)")
    local = after.astimezone(zone(timezone))
    try:
        # cronsim's next time is at or after the start: start a second later for "strictly after".
        fire = next(CronSim(cron, local.replace(microsecond=0) + timedelta(seconds=1)))
    except (CronSimError, StopIteration, ValueError, OverflowError) as exc:
        raise TimingError(
            f"cron: {cron[:MAX_CRON_CHARS]!r} is not a usable cron expression ({exc})"
        ) from None
    return fire.astimezone(UTC)


def upcoming(cron: str | None, every_s: int | None, timezone: str, first: datetime) -> list[datetime]:
    """`first` and the fire times after it, as shown to a person."""
    times = [first]
    while len(times) < SHOWN_FIRE_TIMES:
        times.append(next_after(cron, every_s, timezone, times[-1]))
    return times
