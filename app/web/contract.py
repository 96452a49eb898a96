"""One description per route: the pydantic models of its request and its answers, used both to
check each request and to write the OpenAPI document (app/web/document.py).

A route declares itself with `@operation(...)` under its Flask decorator. The body is still read
by `json_body()` (the size limit, the nesting limit, a JSON object and nothing else: the guarantees
a hostile body meets first); the model then checks its fields, strictly (a boolean is no integer,
a number no string) and refusing unknown keys. Whatever is wrong becomes a 400 whose message names
the field, in the words the rest of the API uses: never a 500, never pydantic's own text.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, TypeVar, get_args

from flask import request
from pydantic import BaseModel, BeforeValidator, ConfigDict, RootModel, StringConstraints, ValidationError

from app.errors import BadRequestError
from app.web.requests import json_body

M = TypeVar("M", bound=BaseModel)
F = TypeVar("F", bound=Callable[..., Any])

OPERATION = "__operation__"  # the attribute of a view function that holds its Operation

# Text as a person may give it: storable anywhere (no NUL, which PostgreSQL refuses; no lone
# surrogate, which UTF-8 cannot encode). The pattern tells clients the NUL half; the other half
# JSON Schema cannot say.
NO_NUL = "^[^\\u0000]*$"
# Not only white space, by every engine's count (JSON Schema's ECMA \s, the Rust regex pydantic
# runs, Python's str.isspace): the class is spelt out, as `\s` means something else to each.
_SPACE = (
    "\\t\\n\\u000b\\f\\r \\u001c-\\u001f\\u0085\\u00a0\\u1680"
    "\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000\\ufeff"
)
NOT_BLANK = f"^[^\\u0000]*[^{_SPACE}\\u0000][^\\u0000]*$"

# Query parameters any route takes besides its own: the token, for clients that cannot set headers.
AUTH_QUERY = frozenset({"token"})


def chars(max_chars: int | None = None, *, blank: bool = True) -> StringConstraints:
    """A string's constraints: at most `max_chars` characters, no NUL (and, `blank=False`, not
    only white space). A lone surrogate pydantic refuses by itself (not valid Unicode)."""
    return StringConstraints(max_length=max_chars, pattern=NO_NUL if blank else NOT_BLANK)


# A pattern's rule in words, for the 400 a person reads (the document has the pattern itself).
RULES: dict[str, str] = {}


def pattern(regex: str, max_chars: int | None = None, *, rule: str | None = None) -> StringConstraints:
    """A string that must match `regex` whole (a name's rule, say); `rule` says it in words. A
    regex has one rule (errors find it by the regex): two fields saying it differently is a bug."""
    if rule is not None and RULES.setdefault(regex, rule) != rule:
        raise ValueError(f"pattern {regex!r} is already said as {RULES[regex]!r}, not {rule!r}")
    return StringConstraints(max_length=max_chars, pattern=regex)


def _whole_number(value: Any) -> Any:
    """JSON has one number type: 5.0 is the integer 5 to JSON Schema, so it is to us."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**63:
        return int(value)
    return value


Text = Annotated[str, chars()]
NonBlank = Annotated[str, chars(blank=False)]
# An integer field's last annotation: 5.0 is taken as 5 (true is still no integer). Its bounds go
# before it, `Annotated[int, Field(ge=1), WHOLE]`, so the document shows them.
WHOLE = BeforeValidator(_whole_number)


class Body(BaseModel):
    """A request body (or a websocket command's fields, or a query string): strict types, and a
    key the model does not know is refused naming it (one policy for every route)."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    def given(self) -> dict[str, Any]:
        """The fields the client sent (left out and null alike mean 'the default')."""
        return {
            name: getattr(self, name) for name in self.model_fields_set if getattr(self, name) is not None
        }


class Query(Body):
    """A query string: every value arrives as text, so numbers are read from it (lax types)."""

    model_config = ConfigDict(extra="forbid", strict=False, frozen=True)


class Answer(BaseModel):
    """An answer's shape, for the document only: answers are built by the engine, not by these
    models; a key not listed may appear (clients must ignore keys they do not know)."""

    model_config = ConfigDict(extra="allow")


@dataclass(frozen=True)
class Header:
    name: str
    description: str
    schema: dict[str, Any]


@dataclass(frozen=True)
class Link:
    """An OpenAPI link from an answer to the operation it leads to (schemathesis follows them)."""

    operation: str
    parameters: Mapping[str, str]


@dataclass(frozen=True)
class Operation:
    summary: str
    answers: Mapping[int, type[BaseModel] | str | None]  # status -> its model, a description, or none
    description: str = ""
    body: type[Body] | None = None
    query: type[Query] | None = None
    errors: Mapping[int, str] = field(default_factory=dict)  # beyond those the rule and inputs imply
    headers: tuple[Header, ...] = ()
    examples: Mapping[str, Any] = field(default_factory=dict)  # a request body's named examples
    links: Mapping[str, Link] = field(default_factory=dict)  # from the first success answer
    content: str | None = "application/json"  # the success answer's media type (None: it varies)
    upload: bool = False  # the body is a multipart form with a `file` part (read by the view)


def operation(summary: str, **details: Any) -> Callable[[F], F]:
    """Declare a view's request and answers. With `body=Model`, the view is called with
    `body=<the checked model>`; with `query=Model`, with `query=<...>`."""
    op = Operation(summary=summary, **details)

    def declare(view: F) -> F:
        @functools.wraps(view)
        def checked_view(*args: Any, **kwargs: Any) -> Any:
            if op.body is not None:  # the body first: a misspelt key in it is the likelier mistake
                kwargs["body"] = parse(op.body, json_body())
            query = parse_query(op.query)
            if op.query is not None:
                kwargs["query"] = query
            return view(*args, **kwargs)

        setattr(checked_view, OPERATION, op)
        return checked_view  # type: ignore[return-value]

    return declare


def declared(view: Callable[..., Any]) -> Operation | None:
    op = getattr(view, OPERATION, None)
    return op if isinstance(op, Operation) else None


def parse(model: type[M], data: Mapping[str, Any]) -> M:
    """`data` checked against `model`; a 400 naming the first wrong field otherwise."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise _refusal(model, data, exc) from None


def parse_query(model: type[Query] | None) -> Query | None:
    """The request's query string against `model` (none: no parameter is taken but the token).
    A parameter given twice is a 400: which one counts would be a guess."""
    args = request.args
    data: dict[str, Any] = {}
    for name in args:
        values = args.getlist(name)
        if name in AUTH_QUERY:
            continue
        if len(values) > 1:
            raise BadRequestError(f"{name[:100]}: given more than once", field=name[:100])
        data[name] = values[0]
    if model is None:
        if data:
            first = sorted(data)[0][:100]
            raise BadRequestError(f"{first}: unknown query parameter (this route takes none)", field=first)
        return None
    return parse(model, data)


_EXPECTED = {
    "string_type": "string",
    "bool_type": "boolean",
    "int_type": "integer",
    "int_from_float": "integer",
    "float_type": "number",
    "dict_type": "object",
    "model_type": "object",
    "model_attributes_type": "object",
    "list_type": "array",
    "int_parsing": "integer",
    "bool_parsing": "boolean",
}


def _refusal(model: type[BaseModel], data: Mapping[str, Any], exc: ValidationError) -> BadRequestError:
    error = _telling(
        exc.errors(include_url=False, include_context=True),
        isinstance(model, type) and issubclass(model, RootModel),
    )
    where = _where(data, error["loc"], error["type"])
    kind, ctx, given = error["type"], error.get("ctx") or {}, error.get("input")
    if kind == "missing":
        message = "required"
    elif kind == "extra_forbidden":
        known = ", ".join(_fields_at(model, error["loc"][:-1]))
        message = f"unknown field (fields: {known})" if known else "unknown field"
    elif kind in _EXPECTED:
        message = f"expected {_EXPECTED[kind]}, got {json_type(given)}"
    elif kind == "string_too_long":
        message = f"at most {ctx['max_length']} characters, got {len(given)}"
    elif kind == "too_long":
        message = f"at most {ctx['max_length']} items"
    elif kind == "string_too_short" and ctx.get("min_length") == 1:
        message = "must not be empty"
    elif kind in ("greater_than_equal", "greater_than", "less_than_equal", "less_than"):
        message = f"must be {_BOUND_WORDS[kind]} {next(iter(ctx.values()))}"
    elif kind in ("literal_error", "enum"):
        message = f"must be one of {ctx.get('expected', '')}".replace("'", "")
    elif kind == "string_pattern_mismatch" and ctx.get("pattern") in (NO_NUL, NOT_BLANK):
        message = "must not contain a NUL character" if "\x00" in given else "must not be empty"
    elif kind == "string_pattern_mismatch":
        rule = RULES.get(str(ctx.get("pattern")))
        message = rule if rule else f"must match {ctx.get('pattern')}"
    elif kind == "string_unicode":
        message = "contains a lone surrogate (not valid Unicode)"
    elif kind == "value_error":
        message = str(ctx.get("error", error["msg"]))
    else:
        message = error["msg"]
    return BadRequestError(f"{where}: {message}" if where else message, field=where or "body")


_BOUND_WORDS = {
    "greater_than_equal": "at least",
    "greater_than": "more than",
    "less_than_equal": "at most",
    "less_than": "less than",
}


def _telling(errors: list[Any], union: bool) -> Any:
    """The error to report. For a body that is one of several shapes (a union), the errors of the
    shape the client most likely meant: one whose fixed fields (channel_type, type) matched, with
    the fewest errors. Then a key the route does not take first: most often a misspelt one."""
    if union:
        by_shape: dict[Any, list[Any]] = {}
        for error in errors:
            by_shape.setdefault(error["loc"][0] if error["loc"] else None, []).append(error)
        errors = min(
            by_shape.values(),
            key=lambda group: (any(e["type"] == "literal_error" for e in group), len(group)),
        )
    unknown = [e for e in errors if e["type"] == "extra_forbidden"]
    return unknown[0] if unknown else errors[0]


def _where(data: Any, loc: tuple[int | str, ...], kind: str) -> str:
    """The field's path as the client wrote it (`tool_search.mode`, `users[2]`), leaving out the
    parts pydantic adds for a union's members; a hostile key is cut short."""
    parts: list[str] = []
    here = data
    for n, part in enumerate(loc):
        last = n == len(loc) - 1
        if isinstance(part, int) and isinstance(here, list) and 0 <= part < len(here):
            parts.append(f"[{part}]")
            here = here[part]
        elif isinstance(here, Mapping) and part in here:
            parts.append(("." if parts else "") + str(part)[:100])
            here = here[part]
        elif last and kind == "missing":
            parts.append(("." if parts else "") + str(part)[:100])  # the field left out
    return "".join(parts)


def _fields_at(model: type[BaseModel], loc: tuple[int | str, ...]) -> list[str]:
    """The field names of the model at `loc` (the top level's, usually; a nested object's)."""
    here: Any = model
    for part in loc:
        info = here.model_fields.get(str(part)) if _is_model(here) else None
        found = [t for t in (info.annotation, *get_args(info.annotation)) if _is_model(t)] if info else []
        if not found:
            return []
        here = found[0]
    return list(here.model_fields) if _is_model(here) else []


def _is_model(kind: Any) -> bool:
    return isinstance(kind, type) and issubclass(kind, BaseModel) and not issubclass(kind, RootModel)


def json_type(value: Any) -> str:
    return {
        str: "string",
        bool: "boolean",
        int: "integer",
        float: "number",
        list: "array",
        dict: "object",
        type(None): "null",
    }.get(type(value), type(value).__name__)
