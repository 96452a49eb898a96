"""Hostile values that every route must refuse with a JSON 4xx: bodies that are not a JSON object
(or not JSON), and path values no resource can have."""

# Bodies that are not a JSON object, or not JSON at all.
RAW_BODIES = {
    "array": b"[]",
    "string": b'"text"',
    "number": b"1",
    "null": b"null",
    "true": b"true",
    "not UTF-8": b'{"message": "\xff\xfe"}',
    "binary": bytes(range(256)),
    "deep arrays": b"[" * 100_000,
    "deep objects": b'{"a":' * 100_000,
    "integer past the digit limit": b'{"message": 1' + b"0" * 5000 + b"}",
    "NaN": b'{"message": NaN}',
    "cut short": b'{"message": "x"',
}
PATH_IDS = {"NUL": "a%00b", "long": "w" * 3000, "lone surrogate": "%ED%A0%80", "not UTF-8": "%FF%FE"}
