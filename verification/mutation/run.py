#!/usr/bin/env python3
"""The mutation check: applies each mutant of mutants.toml to a copy of the source tree, rebuilds the
test programs that see the mutated file, runs them, and prints which test killed it.

    verification/mutation/run.py               every mutant
    verification/mutation/run.py --reduced     the subset CI runs
    verification/mutation/run.py --only ID...  some mutants
    verification/mutation/run.py --list        the catalogue, without running anything
    verification/mutation/run.py --check       only that every mutant still applies (no build; CTest runs it)

The working tree is never written: the mutants are applied to a copy under the build directory
(build/mutation/src), so an interrupted run cannot leave a mutated file behind. The copy is synced to
the working tree (tracked and untracked, ignored files excepted) at every start.

Exit status: 0 when every mutant is killed or is an equivalent mutant that survived; 1 when a mutant
survived without an equivalence argument, an equivalence claim is stale (the mutant was killed), or
a mutant no longer applies (its original text does not occur exactly once); 2 on a usage or setup
error (including a test that fails on the unmutated tree).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
CATALOGUE = HERE / "mutants.toml"

# The test programs a mutated file is checked against, cheapest killers first. A core mutant meets
# the static_asserts of the examples and the exhaustive proofs before the random properties; the
# driver's tests see core through the lane, so they come last for a core mutant.
CORE_TESTS = ["machine_examples_test", "false_record_test", "allocation_test", "exhaustive_test",
              "rule_properties_test", "protocol_state_test", "seed_audit_test", "model_checker_test"]
DRIVER_TESTS = ["driver_generation_test", "driver_request_test", "driver_fault_test",
                "driver_resume_test", "driver_cold_test"]
CLI_TESTS = ["cli_replay_test", "cli_trace_test", "cli_explain_test", "cli_soak_test"]
# pfx::replay's own tests come first for a replay/ mutant; the commands over it see it next.
REPLAY_TESTS = ["replay_run_test", "replay_soak_test"]
ENGINES_TESTS = ["reference_model_test", "engines_conformance_test"]
# The verifier (spec/: the ghost, SAFE, the reference, the model checker) meets its catalogue of wrong
# machines first, then the core tests that use it as their oracle.
VERIFIER_TESTS = ["verifier_test", "model_checker_test", "false_record_test"]
# The Python package's suites are ctest tests (a name with a dot): ctest runs them as the suite does,
# against the module built from the mutated copy, with its environment (the preloaded sanitizer
# runtimes included) and their fixtures (the llama.cpp models written first).
PYTHON_TESTS = ["python.prompt_prefix", "python.seed_differences", "python.drop_in", "python.environment",
                "python.machine", "python.buffers", "python.lane", "python.verdicts", "python.conform"]
PYTHON_TARGETS = ["pfx_python", "pfx_python_files"]
TESTS_FOR = {"core/": CORE_TESTS + DRIVER_TESTS, "driver/": DRIVER_TESTS, "spec/": VERIFIER_TESTS,
             "engines/": ENGINES_TESTS + DRIVER_TESTS, "conform/": ["conform_check_test"],
             "replay/": REPLAY_TESTS + CLI_TESTS, "tools/pfx/": CLI_TESTS, "integrations/llama/": ["llama_engine_test"],
             "integrations/llama_server/": ["llama_server_decisions_test"],
             "python/": PYTHON_TESTS}

CMAKE_OPTIONS = [
    "-DCMAKE_BUILD_TYPE=Release",
    # -O1: the test programs compile a quarter faster than at -O3 and run about as fast.
    "-DCMAKE_CXX_FLAGS_RELEASE=-O1 -DNDEBUG",
    "-DPFX_WARNINGS_AS_ERRORS=ON",  # the project's warnings: a mutant that only warns is killed
    "-DPFX_COMPILE_TIME_PROOFS=OFF",  # exhaustive_test runs the same bodies in seconds
    "-DPFX_BUILD_BENCHMARKS=OFF",
    "-DPFX_BUILD_EXAMPLES=OFF",
    "-DPFX_BUILD_PYTHON=ON",  # only built where a Python suite is asked for (PYTHON_TARGETS)
    "-DPFX_BUILD_CLI=ON",  # the program's own mutants need its tests; only the programs asked for are built
    "-DPFX_INSTALL=OFF",
    "-DPFX_CUDA=OFF",
]
SANITIZE_OPTIONS = [
    "-DCMAKE_CXX_FLAGS=-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer",
    "-DCMAKE_EXE_LINKER_FLAGS=-fsanitize=address,undefined",
]


class Failure(Exception):
    """A setup problem: the check cannot say anything about the mutants."""


@dataclass
class Mutant:
    id: str
    file: str
    category: str
    description: str
    original: str
    replacement: str
    reduced: bool = False
    equivalent: str = ""
    tests: list[str] = field(default_factory=list)

    def programs(self) -> list[str]:
        """The test programs to run, in order: the mutant's own first, then its area's."""
        for prefix, programs in TESTS_FOR.items():
            if self.file.startswith(prefix):
                return self.tests + [p for p in programs if p not in self.tests]
        raise Failure(f"{self.id}: no test programs are known for {self.file}")


@dataclass
class Result:
    mutant: Mutant
    verdict: str  # killed, survived, equivalent, stale-equivalence, does-not-apply
    detail: str
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.verdict in ("killed", "equivalent")

    def text(self) -> str:
        if self.verdict == "killed":
            return f"killed by {self.detail}"
        if self.verdict == "equivalent":
            return f"equivalent: {self.mutant.equivalent}"
        if self.verdict == "stale-equivalence":
            return f"STALE EQUIVALENCE CLAIM: killed by {self.detail}"
        if self.verdict == "does-not-apply":
            return f"DOES NOT APPLY: {self.detail}"
        return "SURVIVED"


def load_catalogue(path: Path) -> list[Mutant]:
    with path.open("rb") as f:
        data = tomllib.load(f)
    mutants = []
    known = {f.name for f in Mutant.__dataclass_fields__.values()}  # type: ignore[attr-defined]
    for entry in data.get("mutant", []):
        unknown = set(entry) - known
        if unknown:
            raise Failure(f"{entry.get('id', '?')}: unknown fields {sorted(unknown)} in {path}")
        try:
            mutants.append(Mutant(**entry))
        except TypeError as e:
            raise Failure(f"{entry.get('id', '?')}: {e}") from None
    ids = [m.id for m in mutants]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        raise Failure(f"duplicate mutant ids: {duplicates}")
    for m in mutants:
        if m.original == m.replacement:
            raise Failure(f"{m.id}: the replacement is the original")
        m.programs()  # an unknown area fails here, before anything is built
    return mutants


def applicability(mutant: Mutant) -> str:
    """Why the mutant cannot be applied to the working tree, or "" when its original occurs once."""
    path = ROOT / mutant.file
    if not path.is_file():
        return f"{mutant.file} does not exist"
    count = path.read_text().count(mutant.original)
    if count != 1:
        return f"the original text occurs {count} times in {mutant.file} (must be once)"
    return ""


def run(command: list[str], cwd: Path, timeout: float | None = None,
        env: dict[str, str] | None = None) -> tuple[int, str]:
    """Runs `command`; returns its status (negative: killed by that signal; None on timeout is
    reported as 124) and its output, stdout and stderr together."""
    process = subprocess.Popen(command, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               env=env, start_new_session=True)
    try:
        out, _ = process.communicate(timeout=timeout)
        return process.returncode, out.decode(errors="replace")
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)  # the test program and anything it started
        out, _ = process.communicate()
        return 124, out.decode(errors="replace")


def source_files() -> list[str]:
    """The working tree's files as git sees them: tracked and untracked, ignored ones excepted."""
    code, out = run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], ROOT)
    if code != 0:
        raise Failure(f"git ls-files failed: {out.strip()}")
    return [f for f in out.split("\0") if f and (ROOT / f).is_file()]


def sync_copy(copy: Path) -> None:
    """Makes `copy` hold exactly the working tree's files. Files already equal are left alone, so
    that the build directory stays valid and only what changed is rebuilt."""
    wanted = set(source_files())
    for name in wanted:
        source, target = ROOT / name, copy / name
        data = source.read_bytes()
        if target.is_file() and target.read_bytes() == data:
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        shutil.copymode(source, target)
    for path in sorted(copy.rglob("*"), reverse=True):
        relative = path.relative_to(copy).as_posix()
        if path.is_file() and relative not in wanted:
            path.unlink()
        elif path.is_dir() and not any(path.iterdir()):
            path.rmdir()


def first_error(output: str) -> str:
    for line in output.splitlines():
        if re.search(r"\berror\b", line) and not line.startswith(("ninja:", "make")):
            line = re.sub(r"^\S*/build/mutation/src/", "", line.strip())
            line = re.sub(r"^(/\S*|\.\.)/src/", "", line)  # absolute, or relative to the build folder
            return line[:200]
    return "the build failed (see the log)"


def failing_test(output: str) -> str:
    """The first failing test of a gtest run, with the RapidCheck seed it ran with when it says; or of
    a Python suite (unittest's "FAIL: test_x (module.Class.test_x)"), with the seed it prints."""
    failed = re.search(r"^\[  FAILED  \] (\S+)", output, re.M)
    python = re.search(r"^(?:FAIL|ERROR): \S+ \((\S+)\)", output, re.M)
    if not failed and python:
        seed = re.search(r"PFX_PY_SEED=(\d+)", output)
        return python.group(1) + (f" (PFX_PY_SEED={seed.group(1)})" if seed else "")
    if not failed:
        return ""
    name = failed.group(1).rstrip(",")
    # RapidCheck prints "Using configuration: ... seed=N" as each property starts, and "Falsifiable
    # after ..." when it fails: the last configuration before the failure is the failing property's,
    # unless the failing test is a plain test (no report follows that configuration).
    before = output[: failed.start()]
    configurations = list(re.finditer(r"Using configuration:.*?seed=(\d+)", before))
    if configurations and re.search(r"^Falsifiable", before[configurations[-1].end():], re.M):
        return f"{name} (RapidCheck seed {configurations[-1].group(1)})"
    return name


class Bench:
    """The copy of the sources, its build directory, and how to build and run the test programs."""

    def __init__(self, work: Path, jobs: int, sanitize: bool, log: Path):
        self.work = work
        self.copy = work / "src"
        self.build = work / ("build-sanitize" if sanitize else "build")
        self.jobs = jobs
        self.sanitize = sanitize
        self.log = log
        self.timeouts: dict[str, float] = {}

    def configure(self) -> None:
        self.copy.mkdir(parents=True, exist_ok=True)
        sync_copy(self.copy)
        generator = ["-G", "Ninja"] if shutil.which("ninja") else []
        options = CMAKE_OPTIONS + (SANITIZE_OPTIONS if self.sanitize else [])
        code, out = run(["cmake", "-S", str(self.copy), "-B", str(self.build), *generator, *options], ROOT)
        if code != 0:
            shutil.rmtree(self.build, ignore_errors=True)
            raise Failure("cmake could not configure the mutation build:\n" + out[-3000:])

    def compile(self, programs: list[str]) -> tuple[bool, str]:
        targets = [p for p in programs if "." not in p]
        if len(targets) < len(programs):  # a Python suite: the module and the package's files
            targets += PYTHON_TARGETS
        code, out = run(["cmake", "--build", str(self.build), "-j", str(self.jobs), "--target", *targets],
                        ROOT)
        return code == 0, out

    def program(self, name: str) -> Path:
        return self.build / "proptest" / name

    def test(self, name: str) -> tuple[int, str]:
        env = dict(os.environ)
        env.pop("RC_PARAMS", None)  # the defaults compiled into each program, as ctest runs them
        env.setdefault("ASAN_OPTIONS", "detect_leaks=0")
        command = [str(self.program(name)), "--gtest_brief=1", "--gtest_fail_fast"]
        if "." in name:  # a ctest test (a Python suite): a skip (no torch, no llama.cpp) passes, killing nothing
            command = ["ctest", "--test-dir", str(self.build), "-R", f"^{re.escape(name)}$", "--output-on-failure",
                       "--no-tests=error"]
        return run(command, self.build, timeout=self.timeouts.get(name, 600), env=env)

    def baseline(self, programs: list[str]) -> None:
        """Builds every program and runs it on the unmutated tree: all must pass, and their times set
        the timeouts (a mutant that makes a program loop is killed by the timeout)."""
        ok, out = self.compile(programs)
        if not ok:
            raise Failure("the unmutated tree does not build:\n" + out[-3000:])
        for name in programs:
            start = time.monotonic()
            code, out = self.test(name)
            seconds = time.monotonic() - start
            if code != 0:
                raise Failure(f"{name} fails on the unmutated tree:\n{out[-3000:]}")
            self.timeouts[name] = max(60.0, 20 * seconds)
            print(f"  baseline {name}: passed in {seconds:.1f} s", flush=True)

    def judge(self, mutant: Mutant) -> Result:
        start = time.monotonic()
        why_not = applicability(mutant)
        if why_not:
            return Result(mutant, "does-not-apply", why_not)
        pristine = (ROOT / mutant.file).read_text()
        target = self.copy / mutant.file
        log = [f"# {mutant.id}: {mutant.description}\n"]
        try:
            target.write_text(pristine.replace(mutant.original, mutant.replacement))
            killer = ""
            for name in mutant.programs():
                ok, out = self.compile([name])
                if not ok:
                    log.append(out)
                    killer = f"the build ({name}): {first_error(out)}"
                    break
                code, out = self.test(name)
                log.append(f"## {name}: status {code}\n{out}")
                if code == 0:
                    continue
                if code == 124:
                    killer = f"{name} (timed out)"
                elif code < 0:
                    killer = f"{name} (crashed: {signal.Signals(-code).name})"
                else:
                    killer = failing_test(out) or f"{name} (status {code})"
                break
        finally:
            target.write_text(pristine)
        (self.log / f"{mutant.id}.log").write_text("\n".join(log))
        seconds = time.monotonic() - start
        if mutant.equivalent:
            verdict = "stale-equivalence" if killer else "equivalent"
        else:
            verdict = "killed" if killer else "survived"
        return Result(mutant, verdict, killer, seconds)


def table(results: list[Result], markdown: bool) -> str:
    rows = [(r.mutant.id, r.mutant.category, r.mutant.description, r.text()) for r in results]
    header = ("mutant", "category", "mutation", "result")
    if markdown:
        escape = lambda s: s.replace("|", "\\|")  # noqa: E731
        lines = ["| " + " | ".join(header) + " |", "|---|---|---|---|"]
        lines += ["| `" + r[0] + "` | " + " | ".join(escape(c) for c in r[1:]) + " |" for r in rows]
        return "\n".join(lines) + "\n"
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header[:3])]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header[:3], widths)) + "  " + header[3]]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r[:3], widths)) + "  " + r[3] for r in rows]
    return "\n".join(lines) + "\n"


def summary(results: list[Result]) -> str:
    counts: dict[str, int] = {}
    for r in results:
        counts[r.verdict] = counts.get(r.verdict, 0) + 1
    order = ["killed", "equivalent", "survived", "stale-equivalence", "does-not-apply"]
    return f"{len(results)} mutants: " + ", ".join(f"{counts[k]} {k}" for k in order if k in counts)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reduced", action="store_true", help="only the mutants marked reduced (CI)")
    parser.add_argument("--only", nargs="+", metavar="ID", help="only these mutants")
    parser.add_argument("--list", action="store_true", help="print the catalogue and exit")
    parser.add_argument("--check", action="store_true",
                        help="only check that every mutant applies to the working tree, then exit")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2, help="build jobs")
    parser.add_argument("--sanitize", action="store_true",
                        help="build under AddressSanitizer and UBSan (slower; its own build directory)")
    parser.add_argument("--work", type=Path, default=ROOT / "build" / "mutation",
                        help="where the copy and its build go (default build/mutation)")
    parser.add_argument("--markdown", type=Path, metavar="FILE", help="also write the table as Markdown")
    parser.add_argument("--catalogue", type=Path, default=CATALOGUE, help=argparse.SUPPRESS)
    args = parser.parse_args()

    try:
        mutants = load_catalogue(args.catalogue)
        if args.only:
            unknown = sorted(set(args.only) - {m.id for m in mutants})
            if unknown:
                raise Failure(f"unknown mutant ids: {unknown}")
            mutants = [m for m in mutants if m.id in args.only]
        elif args.reduced:
            mutants = [m for m in mutants if m.reduced]
        if args.list:
            for m in mutants:
                flags = ("reduced " if m.reduced else "") + ("equivalent" if m.equivalent else "")
                print(f"{m.id:40} {m.file:40} {m.category:26} {flags}")
            return 0
        if args.check:
            stale = [(m, applicability(m)) for m in mutants]
            stale = [(m, why) for m, why in stale if why]
            for m, why in stale:
                print(f"mutation check: {m.id}: DOES NOT APPLY: {why}", file=sys.stderr)
            print(f"mutation check: {len(mutants) - len(stale)} of {len(mutants)} mutants apply")
            return 1 if stale else 0

        started = time.monotonic()
        work = args.work.resolve()
        log = work / "logs"
        log.mkdir(parents=True, exist_ok=True)
        bench = Bench(work, args.jobs, args.sanitize, log)
        print(f"mutation check: {len(mutants)} mutants; sources copied to {bench.copy}", flush=True)
        bench.configure()
        programs = []
        for m in mutants:
            programs += [p for p in m.programs() if p not in programs]
        bench.baseline(programs)
        print(f"  baseline done in {time.monotonic() - started:.0f} s", flush=True)

        results = []
        for i, m in enumerate(mutants, 1):
            r = bench.judge(m)
            results.append(r)
            print(f"[{i}/{len(mutants)}] {m.id}: {r.text()} ({r.seconds:.0f} s)", flush=True)
    except Failure as e:
        print(f"mutation check: {e}", file=sys.stderr)
        return 2

    print()
    print(table(results, markdown=False))
    print(summary(results) + f"; {time.monotonic() - started:.0f} s in all; logs in {log}")
    if args.markdown:
        args.markdown.write_text(table(results, markdown=True))
    bad = [r for r in results if not r.ok]
    for r in bad:
        print(f"mutation check: {r.mutant.id}: {r.text()}", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
