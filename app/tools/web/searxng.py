"""A small SearxNG client: `GET {base}/search?q=…&format=json`, results as plain records.

The base URL is the operator's configuration, so it is reached directly (not through the
SSRF-guarded fetcher); the result URLs it returns are only shown, never fetched here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

SEARXNG_CONNECT_TIMEOUT_SECONDS = 5.0
SEARXNG_TIMEOUT_SECONDS = 20.0  # SearxNG waits on its own engines; it answers within this or fails


# The model's category names and the SearxNG categories they ask for; "general" sends none,
# so the instance's default engines answer.
CATEGORIES = {"general": None, "news": "news", "it": "it", "science": "science"}
USER_AGENT = "turnstone-jobs/0.1 (web_search)"


class SearchError(Exception):
    """The backend could not answer; the message says what happened, for the model to read."""


@dataclass(frozen=True)
class Result:
    title: str
    url: str
    snippet: str


class SearxNG:
    """One SearxNG instance, reached at `base_url`."""

    def __init__(self, base_url: str, timeout: float = SEARXNG_TIMEOUT_SECONDS) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout

    def search(self, query: str, category: str = "general") -> list[Result]:
        """The instance's results for `query`, in its order; `SearchError` when it fails."""
        params = {"q": query, "format": "json"}
        if CATEGORIES.get(category):
            params["categories"] = CATEGORIES[category] or ""
        import httpx  # on first use: see app/tools/web/fetch/__init__

        try:
            response = httpx.get(
                f"{self.base_url}/search",
                params=params,
                timeout=httpx.Timeout(
                    self.timeout, connect=min(self.timeout, SEARXNG_CONNECT_TIMEOUT_SECONDS)
                ),
                headers={"User-Agent": USER_AGENT, "Accept": "application/json"},
                follow_redirects=False,
            )
        except httpx.TimeoutException:
            raise SearchError(f"the search backend did not answer within {self.timeout:g} s") from None
        except httpx.HTTPError as exc:
            raise SearchError(f"the search backend could not be reached ({type(exc).__name__})") from None
        if response.status_code != 200:
            raise SearchError(
                f"the search backend answered {response.status_code} {response.reason_phrase}".rstrip()
            )
        try:
            data = response.json()
        except ValueError:
            raise SearchError(
                "the search backend's answer is not JSON (is its json format enabled?)"
            ) from None
        return _results(data)


def _results(data: Any) -> list[Result]:
    if not isinstance(data, dict) or not isinstance(data.get("results"), list):
        raise SearchError("the search backend's answer has no list of results")
    results = []
    for item in data["results"]:
        if not isinstance(item, dict) or not isinstance(item.get("url"), str) or not item["url"].strip():
            continue  # an entry without an address cannot be shown as a link
        url = item["url"].strip()
        results.append(Result(_one_line(item.get("title")) or url, url, _one_line(item.get("content"))))
    return results


def _one_line(text: Any) -> str:
    """A field of the answer as one line of text; anything but a string is none."""
    return " ".join(text.split()) if isinstance(text, str) else ""
