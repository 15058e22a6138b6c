"""The error every stage of the generator raises for a problem in the spec."""

from __future__ import annotations


class SpecError(Exception):
    """A problem in the spec, reported as `<path>:<line>: <location>: <problem>`.

    `location` names the entry dotted (`ops.allgather.checks[2]`); it is empty for the top level.
    """

    def __init__(self, path: str, line: int, location: str, problem: str):
        where = f"{location}: " if location else ""
        super().__init__(f"{path}:{line}: {where}{problem}")
