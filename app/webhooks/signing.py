"""Standard Webhooks signatures, made with the specification's own library: `whsec_` secrets
(base64), and the three headers over `{id}.{timestamp}.{body}`."""

from __future__ import annotations

import base64
import secrets
from datetime import datetime

from standardwebhooks.webhooks import Webhook

SECRET_BYTES = 32
SECRET_PREFIX = "whsec_"


def new_secret() -> str:
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode()


def headers(secret: str, msg_id: str, sent_at: datetime, body: str) -> dict[str, str]:
    """The headers of one attempt: a fresh timestamp each time (receivers refuse old ones)."""
    return {
        "webhook-id": msg_id,
        "webhook-timestamp": str(int(sent_at.timestamp())),
        "webhook-signature": Webhook(secret).sign(msg_id, sent_at, body),
        "content-type": "application/json",
    }
