"""Redis key names, each built from one template defined here."""

PREFIX = "tj"

EVENT_SEQ = PREFIX + ":ws:{ws_id}:seq"  # last event id of a workstream
EVENT_META = PREFIX + ":ws:{ws_id}:meta"  # hash: origin (the id its ids count from), bytes (log size)
EVENT_LOG = PREFIX + ":ws:{ws_id}:log"  # capped replay log (a stream; entry id = event id)
EVENT_CHANNEL = PREFIX + ":ws:{ws_id}:events"  # live pub/sub channel
EVENT_CHANNEL_PATTERN = PREFIX + ":ws:*:events"
STREAM_FROM = PREFIX + ":ws:{ws_id}:stream_from"  # last event id before a streaming step's deltas
WS_ORDER = PREFIX + ":ws:{ws_id}:order"  # held by a transition until its events are out
TURN_FENCE = PREFIX + ":turn:{turn_id}:attempt"  # the attempt allowed to publish
TURN_CANCEL = PREFIX + ":turn:{turn_id}:cancel"  # set while a cancel is requested
PUBLISHED = PREFIX + ":published:{token}"  # the id a retried publish already got

SOCKETS_OF = PREFIX + ":sockets:{principal}"  # sorted set: a principal's open sockets -> when each lapses
WORKER_PRESENCE = PREFIX + ":workers"  # sorted set: worker name -> when its presence lapses
TRIGGER_STARTS = PREFIX + ":trigger:{trigger_id}:starts"  # sorted set: the last minute's starts (times)

FENCE_TTL_SECONDS = 7 * 24 * 3600
CANCEL_TTL_SECONDS = 24 * 3600
STREAM_FROM_TTL_SECONDS = 3600  # longer than a model step may stream


def budget_warned(owner_id: str, budget: str, period: str) -> str:
    """Set once admins are warned that a user's budget for a period is nearly spent."""
    return f"{PREFIX}:budget-warned:{owner_id}:{budget}:{period}"


def event_seq(ws_id: str) -> str:
    return EVENT_SEQ.format(ws_id=ws_id)


def event_meta(ws_id: str) -> str:
    return EVENT_META.format(ws_id=ws_id)


def event_log(ws_id: str) -> str:
    return EVENT_LOG.format(ws_id=ws_id)


def event_channel(ws_id: str) -> str:
    return EVENT_CHANNEL.format(ws_id=ws_id)


def ws_of_event_channel(channel: str) -> str:
    """The workstream whose `event_channel` this is."""
    head, tail = EVENT_CHANNEL.split("{ws_id}")
    return channel[len(head) : len(channel) - len(tail)]


def turn_fence(turn_id: str) -> str:
    return TURN_FENCE.format(turn_id=turn_id)


def turn_cancel(turn_id: str) -> str:
    return TURN_CANCEL.format(turn_id=turn_id)


def stream_from(ws_id: str) -> str:
    return STREAM_FROM.format(ws_id=ws_id)


def ws_order(ws_id: str) -> str:
    return WS_ORDER.format(ws_id=ws_id)


def published(token: str) -> str:
    return PUBLISHED.format(token=token)


# Sign-in throttling (app/users/throttle.py): failures counted per user name and per address.
LOGIN_FAILURES = PREFIX + ":login:{who}:failures"  # count in the current window
LOGIN_LOCK = PREFIX + ":login:{who}:lock"  # present (with a TTL) while tries are refused


def login_failures(who: str) -> str:
    return LOGIN_FAILURES.format(who=who)


def login_lock(who: str) -> str:
    return LOGIN_LOCK.format(who=who)


def sockets_of(principal: str) -> str:
    return SOCKETS_OF.format(principal=principal)
