"""Fakes at the outside edge: servers the tests drive in-process and reach over HTTP."""
