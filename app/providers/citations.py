"""Provider-native web search on the wire: the neutral tool entry that asks for it (each
provider turns it into its own form), and the sources a reply cited, shown as Markdown links."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

# A neutral tool list entry, {"type": NATIVE_SEARCH, "max_uses": N}: the provider searches itself.
NATIVE_SEARCH = "native_web_search"
SOURCES_HEADING = "Sources:"


def split_tools(tools: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """The function tools, and the native search entry if the list holds one."""
    found = next((t for t in tools if t.get("type") == NATIVE_SEARCH), None)
    return [t for t in tools if t.get("type") != NATIVE_SEARCH], found


class Sources:
    """The distinct pages a reply cited, in the order first cited."""

    def __init__(self) -> None:
        self._seen: dict[str, str] = {}

    def add(self, url: Any, title: Any) -> None:
        if not isinstance(url, str) or not url.strip().lower().startswith(("http://", "https://")):
            return  # only web addresses become links
        url = url.strip()
        if url not in self._seen:
            self._seen[url] = " ".join(title.split()) if isinstance(title, str) and title.strip() else url

    def text(self) -> str:
        """The block appended to the reply's text ("" when nothing was cited)."""
        if not self._seen:
            return ""
        lines = [f"{n}. {markdown_link(title, url)}" for n, (url, title) in enumerate(self._seen.items(), 1)]
        return "\n\n" + SOURCES_HEADING + "\n" + "\n".join(lines)


def markdown_link(title: str, url: str) -> str:
    """`[title](url)` that stays one link whatever the title holds."""
    label = title.replace("\\", "\\\\").replace("[", "\\[").replace("]", "\\]")
    target = url.replace(" ", "%20").replace("(", "%28").replace(")", "%29")
    return f"[{label}]({target})"


def cited(items: Iterable[Any]) -> Iterable[tuple[Any, Any]]:
    """(url, title) of OpenAI `url_citation` annotations (dicts on a streamed delta, or models)."""
    for item in items:
        data = item if isinstance(item, dict) else getattr(item, "model_dump", lambda: {})()
        if isinstance(data, dict) and data.get("type") == "url_citation":
            inner = data.get("url_citation")
            if isinstance(inner, dict):
                yield inner.get("url"), inner.get("title")
