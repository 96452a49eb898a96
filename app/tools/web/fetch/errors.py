"""Why a fetch did not return a page; each message is shown to the model as it is.

FetchError          the fetch failed: a timeout, a refused connection, a body too large
 +-- RefusedError   the guard said no: a private address, a scheme, too many redirects
"""

from __future__ import annotations


class FetchError(Exception):
    """A fetch that returned no page; the message says what happened."""


class RefusedError(FetchError):
    """The guard refused the URL or one of its redirects before anything was requested."""
