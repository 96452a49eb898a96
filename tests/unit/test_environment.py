"""The environment a tool subprocess gets, and redaction of secrets from output."""

import pytest

from app.tools.commands.environment import redact, scrubbed_environment, secret_values

ORDINARY = {
    "PATH": "/usr/bin:/bin",
    "HOME": "/home/me",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "TERM": "xterm",
    "USER": "me",
    "SHELL": "/bin/bash",
    "TZ": "UTC",
}


@pytest.mark.parametrize(
    "name",
    [
        "MY_API_KEY",
        "AWS_SECRET",
        "GITHUB_TOKEN",
        "DB_PASSWORD",
        "SERVICE_CREDENTIAL",
        "GOOGLE_CREDENTIALS",
        "lower_case_api_key",
    ],
)
def test_names_with_secret_suffixes_are_removed(name):
    env = scrubbed_environment({**ORDINARY, name: "value-of-the-secret"})
    assert name not in env


@pytest.mark.parametrize("name", ["DATABASE_URL", "REDIS_URL", "TURNSTONE_API_TOKEN", "OPENAI_API_KEY"])
def test_service_secrets_are_removed(name):
    assert name not in scrubbed_environment({name: "sqlite:///x.db"})


@pytest.mark.parametrize("name", ["CELERY_BROKER_URL", "CELERY_RESULT_BACKEND"])
def test_broker_urls_are_removed(name):
    assert name not in scrubbed_environment({name: "redis://localhost:6379/0"})


def test_url_with_a_password_is_removed():
    env = scrubbed_environment({"SENTRY_URL": "https://user:hunter22@sentry.example.com/1"})
    assert env == {}


def test_url_without_a_password_stays():
    env = scrubbed_environment({"HOMEPAGE_URL": "https://example.com/a:b"})
    assert env == {"HOMEPAGE_URL": "https://example.com/a:b"}


def test_ordinary_variables_stay():
    assert scrubbed_environment({**ORDINARY, "MY_API_KEY": "abcdefghij"}) == ORDINARY


def test_secret_values_are_the_removed_values_of_eight_characters_or_more():
    environ = {**ORDINARY, "MY_API_KEY": "sk-0123456789", "SHORT_TOKEN": "abc"}
    assert secret_values(environ) == ["sk-0123456789"]


def test_secret_values_include_the_password_inside_a_url():
    environ = {"BACKUP_URL": "postgresql://app:s3cretpassw0rd@db/app"}
    assert "s3cretpassw0rd" in secret_values(environ)


def test_redact_replaces_every_occurrence():
    assert redact("a sk-123456789 b sk-123456789", ["sk-123456789"]) == "a [redacted] b [redacted]"


def test_redact_replaces_the_longest_value_whole():
    text = redact("x=abcdefgh12345678", ["abcdefgh", "abcdefgh12345678"])
    assert text == "x=[redacted]"


def test_the_libpq_password_variable_is_removed():
    assert scrubbed_environment({**ORDINARY, "PGPASSWORD": "db-password-1"}) == ORDINARY


def test_a_known_secret_is_removed_whatever_its_variable_is_called():
    env = scrubbed_environment({**ORDINARY, "LLM_AUTH": "sk-model-123456"}, known=["sk-model-123456"])
    assert env == ORDINARY


def test_known_secrets_are_redacted_even_when_no_variable_holds_them():
    assert secret_values(ORDINARY, known=["sk-model-123456", ""]) == ["sk-model-123456"]
