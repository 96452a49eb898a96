"""Schedules (docs/schedules.md): a prompt run on a cron expression or every N seconds; beat's
sweep fires what is due, each firing claimed once by a unique row."""
