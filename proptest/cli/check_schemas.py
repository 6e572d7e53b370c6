"""Every --json output of the pfx program validates against its schema in docs/schemas/ (JSON Schema
draft 2020-12), on real runs: passing, failing, checking nothing, and stopped by a signal.

    check_schemas.py PFX_PROGRAM SCHEMAS_DIR TRACED

TRACED is the traceability table the tests' build writes (build/<preset>/traceability/traced.json):
the audit runs with it and without it.

Exits 77 (skipped, with the reason) when the Python package jsonschema is not installed."""
from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

try:
    import jsonschema
except ImportError:
    print("SKIPPED: the Python package jsonschema is not installed (pip install jsonschema)")
    sys.exit(77)

PROGRAM, SCHEMAS, TRACED = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
SMALL = ["--vocab", "512", "--capacity", "1024"]
RUNS = [  # (schema, arguments, expected exit status)
    ("replay", ["replay", "--requests", "4", "--verify", *SMALL, "--json"], 0),
    ("replay", ["replay", "--requests", "8", "--faults", "0.3", "--seed", "2", *SMALL, "--json"], None),
    ("replay", ["replay", "--requests", "4", "--verify", "--faults", "1", *SMALL, "--json"], 1),
    ("replay", ["replay", "--requests", "3", "--rule-chunk", "8", "--verify", *SMALL, "--json"], None),
    ("soak", ["soak", "--requests", "50", "--json"], 0),
    ("soak", ["soak", "--requests", "50", "--faults", "1", "--json"], 1),
    ("conform", ["conform", "--budget", "quick", "--json"], 0),
    ("conform", ["conform", "--budget", "quick", "--engine", "nondeterministic", "--json"], 4),
    ("conform", ["conform", "--budget", "quick", "--chunk", "6", "--rule-chunk", "4", "--json"], 1),
    ("conform", ["conform", "--budget", "quick", "--chunk", "4", "--prefill-step", "4", "--json"], 0),  # skips
    ("audit", ["audit", "--seed", "3", "--cases", "20", "--protocol-length", "1", "--json", "--traceability", TRACED], 0),
    ("audit", ["audit", "--seed", "3", "--cases", "20", "--protocol-length", "1", "--json"], 0),  # table not checked
    ("explain", ["explain", "--record", "[1,2,3,4]", "--prompt", "[1,2,3,5]", "--keep-min", "1", "--chunk", "1", "--json"], 0),
    ("explain", ["explain", "--record", "[1,2,3,4,5,6,7,8,9,10]", "--prompt", "[1,2,3,4,5,6,7,8,9]", "--keep-min", "2",
                 "--chunk", "2", "--prefill-step", "3", "--json"], 0),  # with the prefill step's row
]
INTERRUPTED = [  # stopped by a signal a moment into the run: each runs far longer than that moment
    ("soak", ["soak", "--requests", "100000000", "--json"], signal.SIGINT),
    ("replay", ["replay", "--requests", "200000", "--engine", "none", *SMALL, "--json"], signal.SIGTERM),
    # The thorough budget alone ends in about half a second, the moment itself: its grids up to 4096
    # take more than a minute.
    ("conform", ["conform", "--budget", "thorough", "--max-grid", "4096", "--json"], signal.SIGINT),
    ("audit", ["audit", "--cases", "100000000", "--protocol-length", "1", "--json", "--traceability", TRACED],
     signal.SIGTERM),
]


def objects(text: str, schema: str) -> list:
    if schema in ("audit", "explain"):  # one object, indented
        return [json.loads(text)]
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def validate(schema: str, text: str, what: str) -> int:
    validator = jsonschema.Draft202012Validator(json.loads((SCHEMAS / f"{schema}.schema.json").read_text()))
    problems = 0
    for obj in objects(text, schema):
        for error in validator.iter_errors(obj):
            print(f"FAIL {what}: {error.json_path}: {error.message}")
            problems += 1
    return problems


def main() -> int:
    problems = 0
    for schema in ("replay", "soak", "conform", "audit", "explain"):
        jsonschema.Draft202012Validator.check_schema(json.loads((SCHEMAS / f"{schema}.schema.json").read_text()))
    for schema, arguments, status in RUNS:
        ran = subprocess.run([PROGRAM, *arguments], capture_output=True, text=True, timeout=600)
        what = "pfx " + " ".join(arguments)
        if status is not None and ran.returncode != status:
            print(f"FAIL {what}: exit {ran.returncode}, expected {status}\n{ran.stderr}")
            problems += 1
        problems += validate(schema, ran.stdout, what)
        print(f"ok   {what}")
    for schema, arguments, sig in INTERRUPTED:
        what = f"pfx {' '.join(arguments)} (stopped by {sig.name})"
        child = subprocess.Popen([PROGRAM, *arguments], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(0.5)
        child.send_signal(sig)
        out, err = child.communicate(timeout=600)
        if child.returncode != 128 + sig.value:
            print(f"FAIL {what}: exit {child.returncode}, expected {128 + sig.value}\n{err}")
            problems += 1
        problems += validate(schema, out, what)
        if any(o.get("ok") is True for o in objects(out, schema)):
            print(f"FAIL {what}: a stopped run says ok")
            problems += 1
        print(f"ok   {what}")
    print(f"{problems} problem(s)" if problems else "every --json output matches its schema")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
