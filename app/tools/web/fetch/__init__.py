"""The guarded HTTP fetcher that tools reaching the web share (web_fetch, open_preview).

`Fetcher.fetch(url)` returns a `Page` or raises `FetchError` (`RefusedError` when
the SSRF guard said no); `page_text(page)` turns a page into text for a model.
`prepared` is what a tool call records of its target when prepared, to hold its run to it.

httpx is imported where a request or a URL is made, never when this package is: httpx loads
`rich` and its command line with it, and the web process and an idle worker need neither.
"""

from app.tools.web.fetch.errors import FetchError, RefusedError
from app.tools.web.fetch.fetcher import Fetcher, Page, system_resolver
from app.tools.web.fetch.guard import Resolver, Target

__all__ = ["FetchError", "Fetcher", "Page", "RefusedError", "Resolver", "Target", "system_resolver"]
