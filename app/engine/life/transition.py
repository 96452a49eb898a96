"""A transition written once, as steps that each write for the row the step before returned:
one statement on PostgreSQL (each step a data-modifying CTE), and on SQLite one transaction of
statements (each step's row handed to the next as parameters).

A step is built from `ref(step, column)`, the column of an earlier step's row: on PostgreSQL a
scalar subquery of that step's CTE, on SQLite a parameter filled from the row it returned. Either
way it is NULL when that step wrote nothing, so a step conditioned on it (`id = ref(...)`, or an
INSERT ... SELECT `WHERE ref(...) IS NOT NULL`) writes nothing either: a chain of such steps
writes all of it or nothing, which is what lets PostgreSQL's statement commit by itself. Every
step returns the columns later steps and the caller read (`RETURNING`; SQLite 3.35+).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import sqlalchemy
from sqlalchemy import DateTime, Insert, bindparam, func
from sqlmodel import Session


class Ref:
    """What a step is built from: `ref(step, column)`, and `clock`, the lease clock (the
    server's on PostgreSQL, read by the statement; elsewhere the parameter `lease_now`, which
    `Steps.run` fills in)."""

    def __init__(self, column: Callable[[str, str], Any], clock: Any) -> None:
        self._column, self.clock = column, clock

    def __call__(self, step: str, column: str) -> Any:
        return self._column(step, column)


@dataclass(frozen=True)
class Step:
    """One write (or a locking read) of a transition, built from `ref`; `required`: the
    transition is declined, with nothing written, when this step finds no row."""

    name: str
    build: Callable[[Ref], Any]
    required: bool = True


@dataclass(frozen=True)
class Done:
    """What a transition's steps returned: each step's rows (on PostgreSQL the first row of
    each, and every row of the one step read whole)."""

    rows: Mapping[str, Sequence[Mapping[str, Any]]]

    def first(self, step: str) -> Mapping[str, Any] | None:
        found = self.rows.get(step)
        return found[0] if found else None

    def all(self, step: str) -> Sequence[Mapping[str, Any]]:
        return self.rows.get(step, ())


@dataclass
class Steps:
    """A transition's steps, in the order they write; `whole`: the step whose every row the
    caller reads (the others give their first)."""

    steps: Sequence[Step]
    whole: str | None = None
    _built: dict[Any, Any] = field(default_factory=dict, repr=False)

    def run(self, s: Session, values: dict[str, Any]) -> Done | None:
        """Run the steps in `s` (on PostgreSQL, a session of `Database.one_statement` commits
        them by themselves); None when a required step found no row. On SQLite the caller then
        rolls back what the steps before it wrote (`run_alone` does)."""
        if s.get_bind().dialect.name == "postgresql":
            return self._run_as_one(s, values)
        return self._run_in_turn(s, values)

    def _gated(self, step: Step, statement: Any, ref: Ref) -> Any:
        """An update (or a locking read) after a required step writes only for that step's row:
        what makes the chain write all of it or nothing. An INSERT ... SELECT names its own."""
        before = [s for s in self.steps[: self.steps.index(step)] if s.required]
        if not before or isinstance(statement, Insert):
            return statement
        first = next(iter(before[-1].build(ref).exported_columns)).key
        return statement.where(ref(before[-1].name, first).is_not(None))

    # -- SQLite: one statement after another, each row handed on as parameters -------------

    def _statements(self) -> list[Any]:
        built = self._built.get(False)
        if built is None:
            built = []
            returned: dict[str, Any] = {}

            def column(step: str, name: str) -> Any:
                return bindparam(f"{step}__{name}", type_=returned[step][name].type)

            ref = Ref(column, bindparam("lease_now", type_=DateTime()))
            for step in self.steps:
                statement = self._gated(step, step.build(ref), ref)
                returned[step.name] = statement.exported_columns
                built.append(statement)
            self._built[False] = built
        return built

    def _run_in_turn(self, s: Session, values: dict[str, Any]) -> Done | None:
        conn, params = s.connection(), {**values, "lease_now": datetime.now(UTC)}
        rows: dict[str, Sequence[Mapping[str, Any]]] = {}
        for step, statement in zip(self.steps, self._statements(), strict=True):
            found: Sequence[Any] = conn.execute(statement, params).mappings().all()
            if step.required and not found:
                return None
            rows[step.name] = found
            for column in statement.exported_columns.keys():  # noqa: SIM118 (a column collection)
                params[f"{step.name}__{column}"] = found[0][column] if found else None
        return Done(rows)

    # -- PostgreSQL: one statement, each step a CTE ----------------------------------------

    def _statement(self) -> Any:
        built = self._built.get(True)
        if built is None:
            ctes: dict[str, Any] = {}

            def column(step: str, name: str) -> Any:
                return sqlalchemy.select(ctes[step].c[name]).limit(1).scalar_subquery()

            ref = Ref(column, func.clock_timestamp())

            for step in self.steps:
                ctes[step.name] = self._gated(step, step.build(ref), ref).cte(step.name)
            # Every CTE read in the outer SELECT, so that each is rendered (PostgreSQL runs a
            # data-modifying CTE whether or not it is read): each step's first row (every row
            # of `whole`) joined to one row, with a marker saying whether there was one.
            joined: Any = sqlalchemy.select(sqlalchemy.literal(1).label("one")).subquery("one")
            columns: list[Any] = []
            for name, cte in ctes.items():
                row = sqlalchemy.select(sqlalchemy.literal(1).label("found"), *cte.c)
                part = (row if name == self.whole else row.limit(1)).subquery(f"{name}_row")
                joined = joined.outerjoin(part, sqlalchemy.true())
                columns.append(part.c.found.label(f"{name}__"))
                columns += [part.c[c.key].label(f"{name}__{c.key}") for c in cte.c]
            built = sqlalchemy.select(*columns).select_from(joined)
            self._built[True] = built
        return built

    def _keys(self) -> list[list[tuple[str, str]]]:
        """Each step's columns, and their labels in the outer SELECT."""
        keys = self._built.get("keys")
        if keys is None:
            statement = self._statement()
            keys = self._built["keys"] = [
                [
                    (label[len(step.name) + 2 :], label)
                    for label in statement.selected_columns.keys()  # noqa: SIM118 (a column collection)
                    if label.startswith(f"{step.name}__") and label != f"{step.name}__"
                ]
                for step in self.steps
            ]
        return keys

    def _run_as_one(self, s: Session, values: dict[str, Any]) -> Done | None:
        found = s.execute(self._statement(), values).mappings().all()
        first = found[0]
        rows: dict[str, Sequence[Mapping[str, Any]]] = {}
        for step, keys in zip(self.steps, self._keys(), strict=True):
            name = step.name
            if first[f"{name}__"] is None:
                if step.required:
                    return None
                rows[name] = []
                continue
            picked = found if name == self.whole else found[:1]
            rows[name] = [{key: row[label] for key, label in keys} for row in picked]
        return Done(rows)


def run_alone(db: Any, steps: Steps, values: dict[str, Any]) -> Done | None:
    """`steps` as a transition of their own: on PostgreSQL one statement that commits by itself,
    on SQLite one transaction, rolled back where a required step finds no row."""
    with db.one_statement() as s:
        done = steps.run(s, values)
        if done is None and not db.is_postgresql:
            s.rollback()
        return done
