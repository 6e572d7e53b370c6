"""llama-server --pfx --pfx-certificate FILE (docs/engines.md, "Certified decode rows on llama.cpp"):
with a certificate `pfx conform --engine llama --certify FILE` wrote on the very configuration served,
the rule also takes the rows decode wrote, and every answer still equals the same request served alone,
cold; a certificate that does not cover the server stops it at start, naming why.

The configuration is llama-server's defaults but for n_batch 64 and n_ubatch 16 and one thread, which
conform checks in seconds (n_batch 2048 would need prompts past the tiny model's context); the load is
test_llama_server_load.py's (four conversations at once, a completion of token ids among them, whose next
turn holds the generated token ids: the rows decode wrote). PFX_PROGRAM names pfx's program.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import unittest

from support import verifies

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # the suite's servers and its load
from test_llama_server import BINARY, MODEL, STARTUP_SECONDS, WHY_NOT, free_port
from test_llama_server_load import DEFAULTS, serve_load

PROGRAM = os.environ.get("PFX_PROGRAM", "")
# One thread: ggml's threads wait for each other spinning, which on a busy machine (a test run beside
# others) costs minutes at 2 threads where 1 takes seconds. conform measures the same count.
THREADS = "1"
CERTIFIED = [THREADS if i > 0 and DEFAULTS[i - 1] == "--threads" else word for i, word in enumerate(DEFAULTS)] \
    + ["--batch-size", "64", "--ubatch-size", "16"]
WHY_NOT_HERE = WHY_NOT or ("" if PROGRAM and os.access(PROGRAM, os.X_OK)
                           else f"pfx's program is not built ({PROGRAM or 'PFX_PROGRAM unset'})")


def certify(path: str, reference_paths: bool = True) -> str:
    """`pfx conform --engine llama --certify path` on the configuration CERTIFIED serves (ggml's reference
    paths as llama-server --pfx runs them, or its own); what it said on standard error."""
    environment = dict(os.environ)
    environment.pop("GGML_CPU_USE_REF", None)
    if reference_paths:
        environment["GGML_CPU_USE_REF"] = "1"
    run = subprocess.run([PROGRAM, "conform", "--engine", "llama", "--model", MODEL, "--chunk", "64", "--ubatch", "16",
                          "--threads", THREADS, "--flash-attn", "auto", "--rule-chunk", "1", "--budget", "quick",
                          "--certify", path, "--no-progress"],
                         capture_output=True, text=True, timeout=600, env=environment)
    assert os.path.exists(path), run.stdout[-2000:] + run.stderr[-2000:]
    return run.stderr


def refusal(arguments: list, settings: list) -> str:
    """What llama-server says when it stops at start with `arguments`; fails where it starts."""
    run = subprocess.run([BINARY, "--model", MODEL, "--host", "127.0.0.1", "--port", str(free_port())] + settings
                         + arguments, capture_output=True, text=True, timeout=STARTUP_SECONDS)
    assert run.returncode != 0, f"llama-server started with {arguments}"
    return run.stdout + run.stderr


@unittest.skipIf(WHY_NOT_HERE, WHY_NOT_HERE)
class LlamaServerCertificate(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.folder = tempfile.TemporaryDirectory()
        cls.certificate = os.path.join(cls.folder.name, "certificate.json")
        cls.said = certify(cls.certificate)

    @classmethod
    def tearDownClass(cls) -> None:
        cls.folder.cleanup()

    @verifies("LLAMA-6 INV-2")
    def test_a_certificate_conform_wrote_takes_the_rows_decode_wrote_and_every_answer_equals_alone(self):
        self.assertIn("decode rows exact: yes", self.said)
        certified, exact, log = serve_load(["--pfx", "--pfx-certificate", self.certificate], settings=CERTIFIED)
        plain, without, _ = serve_load(["--pfx"], settings=CERTIFIED)
        stock, control, _ = serve_load([], settings=CERTIFIED)
        print(f"--pfx --pfx-certificate: {exact['first_differ']} of {exact['first']} first turns and "
              f"{exact['resumed_differ']} of {exact['resumed']} resumed turns differ from alone, {exact['reused']} "
              f"prompt tokens reused ({exact['reused'] / max(control['reused'], 1):.2f} of stock's); --pfx: "
              f"{without['resumed_differ']} differ, {without['reused']} reused; stock: {control['first_differ']} and "
              f"{control['resumed_differ']} differ, {control['reused']} reused; decoded together in "
              f"{certified.together}, {plain.together} and {stock.together} of {certified.turns} turns")
        self.assertIn(f"decode rows exact (the certificate {self.certificate})", log)
        self.assertGreater(certified.together, 0, "no two answers were decoded at the same time: nothing was checked")
        self.assertEqual(exact["first_differ"] + exact["resumed_differ"], 0, exact["example"])
        self.assertEqual(without["first_differ"] + without["resumed_differ"], 0, without["example"])
        # The rows decode wrote are taken: more than the rule takes without the certificate, and what stock
        # takes, up to the rows stock's own answers change.
        self.assertGreater(exact["reused"], without["reused"])
        self.assertGreaterEqual(exact["reused"], 0.97 * control["reused"])
        self.assertGreater(control["first_differ"] + control["resumed_differ"], 0,
                           "stock's answers all equal alone: the check could not fail")

    @verifies("LLAMA-6")
    def test_a_certificate_that_does_not_cover_the_server_stops_it_naming_why(self):
        certificate = ["--pfx", "--pfx-certificate", self.certificate]
        # Another configuration: each field that differs, with both values.
        said = refusal(certificate, DEFAULTS)
        self.assertIn("certifies another configuration than the one served: ", said)
        self.assertIn('n_batch "64" certified, "2048" served', said)
        self.assertIn('n_ubatch "16" certified, "512" served', said)
        said = refusal(certificate + ["--pfx-alone"], CERTIFIED)
        self.assertIn('CPU paths "reference (GGML_CPU_USE_REF)" certified, "ggml\'s own" served', said)
        said = refusal(certificate, CERTIFIED + ["--cache-type-k", "q8_0"])
        self.assertIn('KV type "f16" certified, "K q8_0, V f16" served', said)
        # Changed after conform wrote it.
        with open(self.certificate, encoding="utf-8") as file:
            document = json.load(file)
        document["configuration"]["n_batch"] = "2048"
        edited = os.path.join(self.folder.name, "edited.json")
        with open(edited, "w", encoding="utf-8") as file:
            json.dump(document, file)
        said = refusal(["--pfx", "--pfx-certificate", edited], DEFAULTS)
        self.assertIn("was changed after pfx conform wrote it", said)
        # ggml's own paths (stock llama.cpp): conform finds decode rows differ, and the certificate says so;
        # the server, on those paths, refuses it for that.
        own = os.path.join(self.folder.name, "own.json")
        self.assertIn("decode rows exact: no", certify(own, reference_paths=False))
        said = refusal(["--pfx", "--pfx-alone", "--pfx-certificate", own], CERTIFIED)
        self.assertIn("does not prove decode rows exact for this configuration (", said)
        self.assertIn("; a resume from rows decode wrote differed from its cold run;", said)
        said = refusal(["--pfx", "--pfx-certificate", os.path.join(self.folder.name, "none.json")], CERTIFIED)
        self.assertIn("none.json: cannot read a certificate there", said)


if __name__ == "__main__":
    unittest.main()
