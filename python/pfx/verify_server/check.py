"""The check itself: a workload replayed through a target, each request served as it comes and then
cold, the two compared bit for bit, one request at a time or ``concurrency`` at once."""
from __future__ import annotations

import concurrent.futures
import signal
import threading
import time
from typing import Callable, Optional

from .._arguments import whole
from .compare import described, first_difference
from .errors import BadInput, CheckError
from .report import Compared, Report
from .workloads import Request


class Interrupted(BaseException):
    """SIGINT or SIGTERM came: the run stops where it is (a BaseException, as KeyboardInterrupt is,
    so that no handler of errors catches it)."""

    def __init__(self, signal_number: int):
        super().__init__(signal_number)
        self.signal_number = signal_number


def check(target, workload, *, cold=None, progress: Optional[Callable[[int], None]] = None,
          concurrency: int = 1) -> Report:
    """Replays `workload` (Chat or Trace) through `target` (a server of connect(), or InProcess), one
    request at a time: each request served as it comes, then cold (the target's own way, or by `cold`,
    a second server without prefix caching), compared bit for bit. With `concurrency` above 1 (a
    server only), the workload's streams are served `concurrency` at a time first, and then each
    request cold, alone (serve_concurrently()). Returns the Report; raises BadInput for bad input (a
    target that does not report its reused tokens, a request it refuses), CheckError where a cold run
    was not cold. A SIGINT (KeyboardInterrupt) or an Interrupted stops it: the Report then covers what
    ran and says so."""
    whole("concurrency", concurrency, 1, BadInput)
    if concurrency > 1 and not target.concurrent:
        raise BadInput("--concurrency above 1 needs a server (--url): a vllm.LLM in this process serves one call at a "
                       "time")
    clears = workload.clears()
    if clears and not hasattr(target, "reset"):
        raise BadInput(f"{workload.name}:{clears[0]}: the trace clears the cache, and {target.describe()} has no reset "
                       f"the check can make: replay a trace without clears")
    report = Report(target.describe(),
                    target.cold_words() if cold is None else
                    f"{cold.describe()}, which must not cache prefixes (--no-enable-prefix-caching)",
                    workload.describe(), target.counter, target.no_reuse())
    report.concurrency = concurrency
    began = time.monotonic()
    if concurrency > 1:
        streams = workload.streams()  # bad input (a trace with clears) is refused before anything is served
    try:
        if cold is None and hasattr(target, "reset"):
            target.reset()  # a known start, and the endpoint found before any request is served
        if concurrency > 1:
            for request, served in serve_concurrently(target, streams, concurrency):
                _compare(report, target, cold, request, served)
                if progress:
                    progress(report.compared)
            report.elapsed_s = time.monotonic() - began
            return report
        requests = workload.requests()
        request = next(requests, None)
        while request is not None:
            if request.clear_first:
                target.reset()
            served = target.serve(request)
            _compare(report, target, cold, request, served)
            if progress:
                progress(report.compared)
            try:
                request = requests.send(served)
            except StopIteration:
                request = None
    except KeyboardInterrupt:
        report.interrupted = signal.SIGINT.value
    except Interrupted as stop:
        report.interrupted = stop.signal_number
    report.elapsed_s = time.monotonic() - began
    return report


def _compare(report: Report, target, cold, request: Request, served) -> None:
    """`request`, served as `served`, served cold (by the target's own way, or by `cold`) and compared
    bit for bit: a row of the report."""
    if served.cached is None:
        raise BadInput(target.no_counts())
    if cold is None:
        reference = target.cold(request)
    else:
        reference = cold.serve(request)
    if reference.cached:
        raise CheckError(f"the cold run of request {request.number} took {reference.cached} prompt tokens from "
                         f"the cache: it was not cold")
    difference = first_difference(served, reference)
    report.rows.append(Compared(request, served, reference, None if difference is None else described(difference)))


def serve_concurrently(target, streams: list, concurrency: int) -> list:
    """`streams` (generators of requests, each taking the answer to its last request by send()) served
    by `concurrency` threads, each taking the next stream and serving it to its end, so that up to
    `concurrency` requests are in flight at once: [(request, response)] in the requests' numbers'
    order. The first error stops the threads after their request in flight and is raised."""
    pending = iter(streams)
    lock = threading.Lock()
    stop = threading.Event()
    served: list = []

    def worker() -> None:
        while not stop.is_set():
            with lock:
                stream = next(pending, None)
            if stream is None:
                return
            request = next(stream, None)
            try:
                while request is not None and not stop.is_set():
                    response = target.serve(request)
                    with lock:
                        served.append((request, response))
                    request = stream.send(response)
            except StopIteration:
                pass
            except BaseException:
                stop.set()
                raise

    with concurrent.futures.ThreadPoolExecutor(concurrency, thread_name_prefix="pfx-verify") as pool:
        futures = [pool.submit(worker) for _ in range(concurrency)]
        try:
            for future in futures:
                future.result()
        except BaseException:
            stop.set()
            raise
    return sorted(served, key=lambda pair: pair[0].number)
