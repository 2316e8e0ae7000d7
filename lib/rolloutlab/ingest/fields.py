"""Field specs -> SQL: type checks with readable reasons, and typed values.

A format module parses each record once into a STRUCT whose leaves are JSON text (so a wrong type
is seen, never silently cast to NULL), then describes each field once with a ``Field``. From that
we build the condition that a leaf has the wrong kind, the reason users read, and the typed value.
Kinds are told from the leaf's first character (minified JSON: '"' string, '{' object, ...): far
cheaper than parsing millions of small values again.
"""
from __future__ import annotations

from dataclasses import dataclass

from .. import config
from ..store.stop_reasons import lit

KIND_TEXT = {
    "string": "a string",
    "text": "any JSON value",
    "number": "a number",
    "integer": "an integer",
    "timestamp": "an ISO-8601 timestamp string",
    "object": "a JSON object",
    "array": "a JSON array",
    "boolean": "true or false",
    "json": "any JSON value",
}
# Leaf types in the from_json structure. Containers are parsed as typed lists/structs elsewhere.
NUMBER_START = "('-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9')"


TIMESTAMP = "try_cast({text} AS TIMESTAMPTZ)::TIMESTAMP"
INT_BITS = {32: (-2**31, 2**31 - 1), 64: (-2**63, 2**63 - 1)}


def unquote_sql(ref: str) -> str:
    """The text of a JSON string leaf; only strings with escapes need a JSON parse."""
    return (f"CASE WHEN contains({ref}, '\\') THEN {ref}->>'$' "
            f"ELSE substr({ref}::VARCHAR, 2, length({ref}::VARCHAR) - 2) END")


def json_kind_sql(ref: str) -> str:
    """The JSON kind of a leaf in the words users know (string, number, ...)."""
    return (f"CASE left({ref}, 1) WHEN '\"' THEN 'string' WHEN 't' THEN 'boolean' WHEN 'f' THEN 'boolean' "
            f"WHEN '{{' THEN 'object' WHEN '[' THEN 'array' WHEN 'n' THEN 'null' ELSE 'number' END")


def timestamp_window_sql(ts: str) -> str:
    """True when a typed timestamp lies in the sane window (config.TIMESTAMP_MIN/MAX): a year
    294246, a BC date or 'infinity' is a broken clock, and would break every latency after it."""
    return f"({ts} >= TIMESTAMP {lit(config.TIMESTAMP_MIN)} AND {ts} < TIMESTAMP {lit(config.TIMESTAMP_MAX)})"


@dataclass(frozen=True)
class Field:
    name: str
    kind: str  # one of KIND_TEXT
    required: bool = False
    choices: tuple[str, ...] = ()
    bits: int = 64  # integers: the width of the column they land in (INTEGER is 32)
    minimum: float | None = None  # numbers: the least value that makes sense (0 for durations, sizes)
    maximum: float | None = None  # numbers: the most (a weight of 1e308 overflows any weighted mean)

    def bounds(self) -> tuple[int, int]:
        lo, hi = INT_BITS[self.bits]
        return (lo if self.minimum is None else max(lo, int(self.minimum))), hi

    def want(self) -> str:
        """What the value must be, in words."""
        if self.choices:
            return "one of " + ", ".join(self.choices)
        if self.kind == "integer":
            lo, hi = self.bounds()
            return f"an integer from {lo} to {hi}"
        if self.kind == "number" and self.maximum is not None:
            low = "" if self.minimum is None else f"from {self.minimum:g} "
            return f"a finite number {low}to {self.maximum:g}"
        if self.kind == "number":
            return "a finite number" + ("" if self.minimum is None else f" >= {self.minimum:g}")
        if self.kind == "timestamp":
            return f"an ISO-8601 timestamp string from {config.TIMESTAMP_MIN} to {config.TIMESTAMP_MAX}"
        return KIND_TEXT[self.kind]

    def _conditions(self, ref: str) -> tuple[str, str]:
        """(the leaf is of the wrong kind, the leaf is of the right kind but out of range), as SQL."""
        first = f"left({ref}, 1)"
        lo, hi = self.bounds()
        number = f"try_cast({ref}::VARCHAR AS DOUBLE)"
        timestamp = TIMESTAMP.format(text=unquote_sql(ref))
        kind = {
            "string": f"{first} <> '\"' AND {first} NOT IN {NUMBER_START}",
            "text": "false",
            "json": "false",
            "number": f"{first} NOT IN {NUMBER_START}",
            "integer": f"({first} NOT IN {NUMBER_START} OR contains({ref}, '.') OR contains({ref}, 'e') "
                       f"OR contains({ref}, 'E'))",
            "timestamp": f"({first} <> '\"' OR {timestamp} IS NULL)",
            "object": f"{first} <> '{{'",
            "array": f"{first} <> '['",
            "boolean": f"{ref} NOT IN ('true', 'false')",
        }[self.kind]
        below = "" if self.minimum is None else f" OR {number} < {float(self.minimum)!r}"
        below += "" if self.maximum is None else f" OR {number} > {float(self.maximum)!r}"
        out_of_range = {
            # 1e400 parses as inf: never a score or a latency
            "number": f"(NOT coalesce(isfinite({number}), false){below})",
            # the column's width: a larger value would abort the whole load
            "integer": f"(try_cast({ref}::VARCHAR AS HUGEINT) IS NULL OR try_cast({ref}::VARCHAR AS HUGEINT) NOT BETWEEN {lo} AND {hi})",
            "timestamp": f"NOT {timestamp_window_sql(timestamp)}",
        }.get(self.kind, "false")
        if self.choices:
            allowed = ", ".join(lit(c) for c in self.choices)
            kind = f"({kind} OR ({ref}->>'$') NOT IN ({allowed}))"
        return kind, out_of_range

    def bad_type_sql(self, ref: str) -> str:
        """True when the JSON leaf at ``ref`` is present and of the wrong kind or out of range."""
        kind, out_of_range = self._conditions(ref)
        return f"({ref} IS NOT NULL AND ({kind} OR {out_of_range}))"

    def reason_sql(self, ref: str, where: str) -> str:
        """Why the value is bad; ``where`` is an SQL expression naming the field's location."""
        kind, _ = self._conditions(ref)
        wrong_kind = lit("' must be " + ("one of " + ", ".join(self.choices) if self.choices
                                         else KIND_TEXT[self.kind]) + ", got ")
        out_of_range = lit("' must be " + self.want() + ", got ")
        return (f"'field ''' || {where} || CASE WHEN {kind} THEN {wrong_kind} ELSE {out_of_range} END "
                f"|| {json_kind_sql(ref)} || ' ' || left({ref}, 60)")

    def typed_problem_sql(self, col: str) -> str:
        """True when a typed value (a store's column, e.g. a lake's) breaks the rule a log's value
        of this field is held to: the same bounds, finiteness, time window and choices."""
        lo, hi = self.bounds()
        problem = {
            "number": f"NOT isfinite({col})" + ("" if self.minimum is None else f" OR {col} < {float(self.minimum)!r}")
                      + ("" if self.maximum is None else f" OR {col} > {float(self.maximum)!r}"),
            "integer": f"{col} NOT BETWEEN {lo} AND {hi}",
            "timestamp": f"NOT {timestamp_window_sql(col)}",
        }.get(self.kind, "false")
        if self.choices:
            problem += f" OR {col} NOT IN ({', '.join(lit(c) for c in self.choices)})"
        return f"({col} IS NOT NULL AND ({problem}))"

    def typed_reason_sql(self, col: str, name: str) -> str:
        """Why the typed value breaks the rule, naming the field ``name`` and the value."""
        return f"{lit(f'field {name!r} must be {self.want()}, got ')} || left({col}::VARCHAR, 60)"

    def value_sql(self, ref: str) -> str:
        """The typed value of the JSON leaf at ``ref`` (assumes it passed ``bad_type_sql``)."""
        text = f"CASE WHEN left({ref}, 1) = '\"' THEN {unquote_sql(ref)} ELSE {ref}::VARCHAR END"
        return {
            "string": text,
            "text": text,
            "json": ref,
            "number": f"try_cast({ref}::VARCHAR AS DOUBLE)",
            "integer": f"try_cast({ref}::VARCHAR AS BIGINT)",
            "timestamp": TIMESTAMP.format(text=unquote_sql(ref)),
            "object": ref,
            "array": ref,
            "boolean": f"({ref} = 'true')",
        }[self.kind]


def struct_type(fields: list[Field]) -> str:
    """The from_json structure that keeps every field as a JSON leaf."""
    return "{" + ", ".join(f'"{f.name}": "JSON"' for f in fields) + "}"


def first_problem_sql(checks: list[tuple[str, str]]) -> str:
    """CASE returning the reason of the first failing (condition, reason) pair, else NULL."""
    if not checks:
        return "NULL"
    whens = "\n        ".join(f"WHEN {cond} THEN {reason}" for cond, reason in checks)
    return f"CASE\n        {whens}\n        END"


def type_checks(fields: list[Field], prefix: str, where_prefix: str = "") -> list[tuple[str, str]]:
    """(condition, reason) pairs for every field's type, in field order.

    ``prefix`` is the SQL of the struct holding the leaves; ``where_prefix`` an SQL expression put
    before the field name in reasons (e.g. ``'tool_calls[' || idx || '].'`` for nested items).
    """
    checks = []
    for f in fields:
        ref = f'{prefix}."{f.name}"'
        where = f"{where_prefix} || {lit(f.name)}" if where_prefix else lit(f.name)
        checks.append((f.bad_type_sql(ref), f.reason_sql(ref, where)))
    return checks


def required_checks(fields: list[Field], prefix: str, where_prefix: str = "") -> list[tuple[str, str]]:
    checks = []
    for f in fields:
        if f.required:
            where = f"{where_prefix} || {lit(f.name)}" if where_prefix else lit(f.name)
            checks.append((f'{prefix}."{f.name}" IS NULL', f"'missing required field ''' || {where} || ''''"))
    return checks
