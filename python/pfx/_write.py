"""Machine.write: the protocol as a context manager, for engines written in Python.

    with lane.write(prompt) as w:             # begin(prompt, the granted offset)
        logits = engine.prefill(prompt, start=w.offset)
        generated = engine.decode(...)
        w.commit(prompt + generated, len(prompt))
    # an exception inside the block, or leaving it without commit, aborts: the record keeps
    # ids[0:offset), whose rows were not touched
"""
from __future__ import annotations

from ._native import Decision, Machine, Phase


class Write:
    """One request being written into the KV state (between begin and commit or abort)."""

    __slots__ = ("_machine", "_prompt", "_offset", "_open", "_begun_at", "decision")

    def __init__(self, machine: Machine, prompt, offset) -> None:
        self._machine = machine
        self._prompt = prompt
        self._offset = offset
        self._open = False
        self._begun_at: int | None = None  # the offset begin granted: readable after commit too
        self.decision: Decision | None = None  # set by __enter__: the rule's answer for the prompt

    def __enter__(self) -> "Write":
        if self._open:
            raise RuntimeError("this write has already begun: use a new lane.write(...) per request")
        offset = self._offset
        if offset is None:
            offset = self._machine.query(self._prompt).offset
        self.decision = self._machine.begin(self._prompt, offset)  # pfx.Refused: nothing changed
        self._prompt = None  # not kept alive for the length of the request
        self._begun_at = self._machine.begin_offset
        self._open = True
        return self

    @property
    def offset(self) -> int:
        """Where the request began: prefill prompt[offset:]; rows [0, offset) are reused. Readable
        once the block has begun, after commit too (the offset does not change)."""
        if self._begun_at is None:
            raise RuntimeError("the write has not begun: read offset inside its with block")
        return self._begun_at

    def commit(self, ids, canonical_end) -> None:
        """Publish ids = prompt + generated, canonical_end = len(prompt). Refused (pfx.Refused, and
        the block's exit then aborts) when ids do not start with the begun prompt, or canonical_end
        is past ids or past the prompt. After a clear inside the block it stores nothing."""
        if not self._open:
            raise RuntimeError("the write is not open: commit once, inside its with block")
        self._machine.commit(ids, canonical_end)
        self._open = False

    def __exit__(self, kind, value, traceback) -> bool:
        if self._open:  # an exception, or no commit: the rows past the offset may be half written
            self._open = False
            if self._machine.phase == Phase.writing:
                self._machine.abort()
        return False  # an exception goes on


def write(self: Machine, prompt, offset=None) -> Write:
    """A context manager over begin/commit/abort: ``with lane.write(prompt, offset) as w: ...;
    w.commit(ids, canonical_end)``. offset: 0 (a cold prefill) or the granted offset; None (the
    default) takes the granted one. Begins on entering the block; an exception inside it, or leaving
    it without commit, aborts (the record keeps its valid prefix)."""
    return Write(self, prompt, offset)
