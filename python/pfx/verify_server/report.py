"""What the check found: a row a request (``Compared``), and the ``Report`` of a run: its verdict,
exit status, text and JSON (docs/schemas/verify_server.schema.json)."""
from __future__ import annotations

import dataclasses
import json
import signal
import statistics
from typing import Optional

from .. import _native
from .compare import Served
from .words import counted, escaped, ms
from .workloads import PROGRAM, Request


@dataclasses.dataclass(frozen=True)
class Compared:
    """One request served, then cold: what differs first (None: equal bit for bit)."""
    request: Request
    served: Served
    cold: Served
    difference: Optional[str]


class Report:
    """What the check found. `ok` only when something resumed from the cache was compared and every
    response equalled its cold run; str() is the text report, to_json() the JSON one."""

    def __init__(self, target: str, cold: str, workload: str, counter: str, no_reuse: str = ""):
        self.target, self.cold, self.workload, self.counter, self.no_reuse = target, cold, workload, counter, no_reuse
        self.rows: list = []
        self.concurrency = 1
        self.interrupted: Optional[int] = None
        self.elapsed_s = 0.0

    @property
    def compared(self) -> int:
        return len(self.rows)

    @property
    def resumed(self) -> list:
        return [row for row in self.rows if row.served.cached]

    @property
    def mismatches(self) -> list:
        return [row for row in self.rows if row.difference is not None]

    @property
    def prompt_tokens(self) -> int:
        return sum(row.served.prompt_tokens for row in self.rows)

    @property
    def reused_tokens(self) -> int:
        return sum(row.served.cached for row in self.rows)

    @property
    def unchecked(self) -> str:
        """Why the run vouches for nothing, or "": a check that compared nothing reuse could break fails."""
        if not self.rows:
            return "no response was compared with a cold run"
        if not self.resumed:
            return ("no request resumed from the server's cache (every reused-token count was 0), so nothing reuse "
                    f"could break was compared: {self.no_reuse or 'is prefix caching on?'}")
        return ""

    @property
    def ok(self) -> bool:
        return not self.mismatches and not self.unchecked and self.interrupted is None

    @property
    def exit_status(self) -> int:
        if self.interrupted is not None:
            return 128 + self.interrupted
        return 0 if self.ok else 1

    def first_mismatch(self) -> Optional[str]:
        mismatches = self.mismatches
        if not mismatches:
            return None
        first = mismatches[0]
        return _native._describe_mismatches(len(mismatches), first.request.number, first.request.line,
                                            first.request.label, first.difference)

    def ttft_ms(self) -> Optional[dict]:
        """The median time to first token of the resumed requests and of their cold runs, where measured."""
        pairs = [(row.served.ttft_s, row.cold.ttft_s) for row in self.resumed
                 if row.served.ttft_s is not None and row.cold.ttft_s is not None]
        if not pairs:
            return None
        resumed = statistics.median(p[0] for p in pairs) * 1e3
        cold = statistics.median(p[1] for p in pairs) * 1e3
        return {"requests": len(pairs), "resumed_median": resumed, "cold_median": cold,
                "ratio": cold / resumed if resumed > 0 else None}

    def __str__(self) -> str:
        served = (f"{self.concurrency} requests in flight, each compared with its cold run served alone"
                  if self.concurrency > 1 else "one request at a time")
        lines = [f"{PROGRAM}: {self.target}", f"workload: {self.workload}, greedy, {served}",
                 f"cold runs: {self.cold}",
                 f"{'#':>5} {'line':>5} {'request':<26} {'prompt':>7} {'cached':>7} {'ttft ms':>9} {'cold ms':>9} "
                 f"bit-exact"]
        for row in self.rows:
            request = row.request
            lines.append(f"{request.number:>5} {request.line or '-':>5} {escaped(request.label or '-')[:26]:<26} "
                         f"{row.served.prompt_tokens:>7} {row.served.cached:>7} {ms(row.served.ttft_s):>9} "
                         f"{ms(row.cold.ttft_s):>9} {'yes' if row.difference is None else 'NO: ' + row.difference}")
        reuse = f"{self.reused_tokens / self.prompt_tokens:.1%}" if self.prompt_tokens else "-"
        lines.append(f"{counted(self.compared, 'response')} compared with a cold run, {len(self.resumed)} resumed "
                     f"from the cache, {counted(len(self.mismatches), 'mismatch', 'mismatches')}; "
                     f"{self.elapsed_s:.1f} s")
        lines.append(f"reuse: {self.reused_tokens} of {self.prompt_tokens} prompt tokens ({reuse}), by the server's own "
                     f"count ({self.counter})")
        ttft = self.ttft_ms()
        if ttft is not None:
            ratio = f" ({ttft['ratio']:.2f}x)" if ttft["ratio"] else ""
            lines.append(f"time to first token, median of the {counted(ttft['requests'], 'resumed request')}: "
                         f"{ttft['resumed_median']:.2f} ms resumed, {ttft['cold_median']:.2f} ms cold{ratio}")
        elif self.resumed:
            lines.append("time to first token: not measured (this server gives none; a vllm.LLM keeps it only "
                         "with its request stats, disable_log_stats=False)")
        if self.mismatches:
            lines.append(f"MISMATCH: {escaped(self.first_mismatch())} (exit status 1)")
        if self.interrupted is not None:
            name = signal.Signals(self.interrupted).name
            lines.append(f"INTERRUPTED by {name} after {counted(self.compared, 'request')}: the summary covers only "
                         f"what ran, and the run did not pass (exit status {self.exit_status})")
        elif self.unchecked:
            lines.append(f"FAILED: {self.unchecked} (exit status 1)")
        if self.ok:
            lines.append(f"{PROGRAM}: every check passed")
        return "\n".join(lines) + "\n"

    def to_json(self) -> str:
        first = self.mismatches[0] if self.mismatches else None
        report = {
            "type": "verify_server", "target": self.target, "cold": self.cold, "workload": self.workload,
            "concurrency": self.concurrency,
            "requests": self.compared, "compared": self.compared, "resumed": len(self.resumed),
            "mismatches": len(self.mismatches), "prompt_tokens": self.prompt_tokens,
            "reused_tokens": self.reused_tokens,
            "reuse_fraction": self.reused_tokens / self.prompt_tokens if self.prompt_tokens else 0.0,
            "ttft_ms": self.ttft_ms(),
            "first_mismatch": None if first is None else {
                "request": first.request.number, "line": first.request.line, "label": first.request.label,
                "what": first.difference, "text": self.first_mismatch()},
            "responses": [row_json(row) for row in self.rows],
            "elapsed_s": self.elapsed_s, "interrupted": self.interrupted, "ok": self.ok,
            "exit_status": self.exit_status}
        if self.unchecked:
            report["unchecked"] = self.unchecked
        return json.dumps(report)


def row_json(row: Compared) -> dict:
    def milliseconds(seconds):
        return None if seconds is None else seconds * 1e3
    return {"request": row.request.number, "line": row.request.line, "label": row.request.label,
            "prompt_tokens": row.served.prompt_tokens, "generated_tokens": len(row.served.tokens),
            "cached_tokens": row.served.cached, "cold_cached_tokens": row.cold.cached,
            "ttft_ms": milliseconds(row.served.ttft_s), "cold_ttft_ms": milliseconds(row.cold.ttft_s),
            "bitexact": row.difference is None, "mismatch": row.difference}
