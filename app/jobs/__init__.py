"""Runs (the job API's, docs/runs.md; not app/runs.py, a local run's records): a turn started
with a contract (what may run without a person, a deadline), whose status a caller reads or
waits on."""
