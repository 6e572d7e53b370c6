"""pfx._native.conform_observed, the report of a check written in Python of what an engine served
(pfx.integrations.vllm.conform), on what such a check may hand it beyond the grids: offsets it skipped
because the rule never resumes there (per grid, with one reason) and whether a request's answer depends
on what is batched beside it. Both are read back from ConformReport and its JSON (checked against
docs/schemas/conform.schema.json where jsonschema is installed), leave the verdict as it is, and bad
input is refused with an error that names it. Needs no numpy."""
from __future__ import annotations

import json
import pathlib
import unittest

from pfx import _native
from support import SEED, rng, verifies

SCHEMA = pathlib.Path(__file__).resolve().parents[2] / "docs" / "schemas" / "conform.schema.json"
REASON = "a resume whose last prefill step is one token where the cold run's is not is never made"
GENERATED = {"where": "generated", "step": 2, "got": 17, "expected": 42}


def observed(**changes):
    """A small report of what an engine served (vLLM's check hands in the same), with `changes`."""
    arguments = dict(engine="served", budget=_native.conform_budget("quick"), chunk=4, rule_chunk=4, vocab=64,
                     lengths=[2, 9], prompts=2, cold_runs=4, prefilled_tokens=0,
                     premises_checked=("finite logits", "logits depend on tokens"), premise_failure=None,
                     cold_disagreement=None, grids=[{"grid": 4, "resumes": 3, "mismatch": None}], decode_rows=None,
                     elapsed_s=0.0)
    arguments.update(changes)
    return _native.conform_observed(**arguments)


def grid_mismatch(offset):
    return {"prompt_number": 1, "prompt": list(range(1, 10)), "held": list(range(1, 9)) + [0], "offset": offset,
            "difference": GENERATED}


def random_grids(draw):
    """Grids 1, 2, 4, ... with random resumes, skips (some given as no key: 0) and mismatches."""
    grids = []
    for i in range(draw.randrange(1, 6)):
        resumes = draw.randrange(4)
        grid = {"grid": 1 << i, "resumes": resumes,
                "mismatch": grid_mismatch(1 << i) if resumes and draw.random() < 0.4 else None}
        skipped = draw.randrange(4)
        if skipped or draw.random() < 0.5:
            grid["skipped"] = skipped
        grids.append(grid)
    return grids


def schema_errors(report):
    """What the schema finds wrong with the report's JSON (None: jsonschema is not installed)."""
    try:
        import jsonschema  # pip package "jsonschema"
    except ImportError:
        return None
    validator = jsonschema.Draft202012Validator(json.loads(SCHEMA.read_text(encoding="utf-8")))
    return [f"{error.json_path}: {error.message}" for error in validator.iter_errors(json.loads(report.to_json()))]


class ObservedSkips(unittest.TestCase):
    @verifies("VLLM-4 CONF-1")
    def test_skipped_offsets_are_read_per_grid_said_with_their_reason_and_never_make_a_grid_exact(self):
        draw = rng(self)
        for case in range(200):
            grids = random_grids(draw)
            rule_chunk = draw.choice([1, 2, 4, 8, 16, 32])
            skipped = sum(g.get("skipped", 0) for g in grids)
            reason = REASON if skipped else draw.choice([None, REASON])
            with self.subTest(case=case, grids=grids, rule_chunk=rule_chunk, seed=SEED):
                report = observed(grids=grids, rule_chunk=rule_chunk, skip_reason=reason)
                plain = observed(grids=[{k: v for k, v in g.items() if k != "skipped"} for g in grids],
                                 rule_chunk=rule_chunk)
                self.assertEqual([g.skipped for g in report.grids], [g.get("skipped", 0) for g in grids])
                self.assertEqual([g.exact for g in report.grids],
                                 [g["resumes"] > 0 and g["mismatch"] is None for g in grids])
                self.assertEqual((report.verdict, report.recommended), (plain.verdict, plain.recommended))
                self.assertEqual(report.skip_reason, reason)
                j = json.loads(report.to_json())
                self.assertEqual([g["skipped"] for g in j["grids"]], [g.skipped for g in report.grids])
                self.assertEqual(j["skip_reason"], reason)
                self.assertEqual(j["comparisons"], json.loads(plain.to_json())["comparisons"])
                said = f"\nskipped: {skipped} offset{'' if skipped == 1 else 's'} the rule never resumes at: {REASON}\n"
                self.assertEqual(said in str(report), reason is not None, str(report))
                self.assertEqual(schema_errors(report) or [], [])
        plain = observed()
        self.assertIsNone(plain.skip_reason)
        self.assertNotIn("skip", str(plain))

    @verifies("VLLM-4")
    def test_bad_skips_are_refused_naming_the_problem(self):
        grid = {"grid": 4, "resumes": 3, "mismatch": None}
        for changes, error, words in (
                ({"grids": [dict(grid, skipped=-1)], "skip_reason": REASON}, ValueError,
                 r"grids\[0\]\['skipped'\] must be >= 0, not -1"),
                ({"grids": [dict(grid, skipped="2")], "skip_reason": REASON}, TypeError, r"grids\[0\]\['skipped'\]"),
                ({"grids": [dict(grid, skiped=2)], "skip_reason": REASON}, ValueError,
                 r"grids\[0\] has an unknown key 'skiped': expected 'grid', 'resumes', 'skipped', 'mismatch'"),
                ({"grids": [dict(grid, skipped=2)]}, ValueError,
                 "2 offsets skipped, but no skip_reason says why the rule never resumes there"),
                ({"skip_reason": 5}, TypeError, "skip_reason must be a str or None"),
                ({"skip_reason": ""}, ValueError, "skip_reason is empty"),
                ({"grids": [{"grid": 4, "skipped": 1, "mismatch": None}], "skip_reason": REASON}, ValueError,
                 r"grids\[0\] has no 'resumes'")):
            with self.subTest(changes=changes), self.assertRaisesRegex(error, words):
                observed(**changes)


class ObservedBatching(unittest.TestCase):
    @verifies("VLLM-4 CONF-1")
    def test_batching_is_read_back_leaves_the_verdict_and_counts_its_batches(self):
        draw = rng(self)
        for case in range(200):
            grids = random_grids(draw)
            for g in grids:
                g.pop("skipped", None)
            batches = draw.randrange(5)
            mismatch = None
            if batches and draw.random() < 0.5:
                mismatch = {"prompt_number": draw.randrange(10), "prompt": [draw.randrange(64) for _ in range(5)],
                            "beside": [[draw.randrange(64) for _ in range(draw.randrange(1, 4))]
                                       for _ in range(draw.randrange(1, 4))],
                            "difference": draw.choice([GENERATED, {"where": "logprob", "step": 0, "got": -1.5,
                                                                    "expected": -0.5}])}
            with self.subTest(case=case, grids=grids, batches=batches, mismatch=mismatch, seed=SEED):
                alone = observed(grids=grids)
                report = observed(grids=grids, batching={"batches": batches, "mismatch": mismatch})
                self.assertEqual((report.verdict, report.recommended), (alone.verdict, alone.recommended))
                b = report.batching
                self.assertEqual((b.batches, b.independent), (batches, batches > 0 and mismatch is None))
                j = json.loads(report.to_json())
                self.assertEqual(j["comparisons"], json.loads(alone.to_json())["comparisons"] + batches)
                self.assertEqual(j["batching"]["batches"], batches)
                self.assertEqual(j["batching"]["independent"], b.independent)
                if mismatch is None:
                    self.assertIsNone(b.mismatch)
                    self.assertNotIn("mismatch", j["batching"])
                    self.assertEqual(report.explanation, alone.explanation)
                else:
                    m = b.mismatch
                    self.assertEqual((m.prompt_number, m.prompt, m.beside),
                                     (mismatch["prompt_number"], mismatch["prompt"], mismatch["beside"]))
                    self.assertEqual((m.difference.where, m.difference.index),
                                     (mismatch["difference"]["where"], mismatch["difference"]["step"]))
                    self.assertEqual({k: j["batching"]["mismatch"][k] for k in ("prompt_number", "prompt", "beside")},
                                     {k: mismatch[k] for k in ("prompt_number", "prompt", "beside")})
                    others = len(mismatch["beside"])
                    self.assertIn(f"DEPENDS on what is batched beside it: prompt {m.prompt_number} (5 tokens) beside "
                                  f"{others} other{'' if others == 1 else 's'}: ", str(report))
                    self.assertEqual("served alone" in report.explanation, report.verdict in ("safe", "unsafe"))
                self.assertEqual(schema_errors(report) or [], [])
        self.assertIsNone(observed().batching)
        self.assertNotIn("batching", observed().to_json())

    @verifies("VLLM-4")
    def test_bad_batching_is_refused_naming_the_problem(self):
        mismatch = {"prompt_number": 3, "prompt": [7, 8], "beside": [[1, 2], [3]], "difference": GENERATED}
        for batching, error, words in (
                ([], TypeError, "batching must be a dict"),
                ({"mismatch": None}, ValueError, "batching has no 'batches'"),
                ({"batches": 1}, ValueError, "batching has no 'mismatch'"),
                ({"batches": -1, "mismatch": None}, ValueError, r"batching\['batches'\] must be >= 0, not -1"),
                ({"batches": 1.5, "mismatch": None}, TypeError, r"batching\['batches'\]"),
                ({"batches": 1, "mismatch": None, "batch": 2}, ValueError,
                 "batching has an unknown key 'batch': expected 'batches', 'mismatch'"),
                ({"batches": 1, "mismatch": [1]}, TypeError, r"batching\['mismatch'\] must be a dict"),
                ({"batches": 0, "mismatch": mismatch}, ValueError, "batching has a mismatch but 0 batches"),
                ({"batches": 1, "mismatch": {k: v for k, v in mismatch.items() if k != "beside"}}, ValueError,
                 r"batching\['mismatch'\] has no 'beside'"),
                ({"batches": 1, "mismatch": dict(mismatch, beside=3)}, TypeError,
                 r"batching\['mismatch'\]\['beside'\] must be a list of prompts"),
                ({"batches": 1, "mismatch": dict(mismatch, beside=[])}, ValueError,
                 r"batching\['mismatch'\]\['beside'\] is empty"),
                ({"batches": 1, "mismatch": dict(mismatch, beside=[[1, -2]])}, ValueError,
                 r"batching\['mismatch'\]\['beside'\]\[0\]\[1\]: expected a token id"),
                ({"batches": 1, "mismatch": dict(mismatch, prompt_number=-1)}, ValueError,
                 r"batching\['mismatch'\]\['prompt_number'\] must be >= 0"),
                ({"batches": 1, "mismatch": dict(mismatch, difference=dict(GENERATED, where="row"))}, ValueError,
                 r"batching\['mismatch'\]\['difference'\]\['where'\] is 'row'"),
                ({"batches": 1, "mismatch": dict(mismatch, held=[1])}, ValueError,
                 r"batching\['mismatch'\] has an unknown key 'held'")):
            with self.subTest(batching=batching), self.assertRaisesRegex(error, words):
                observed(batching=batching)


class ObservedSchema(unittest.TestCase):
    @verifies("VLLM-4 CONF-2")
    def test_the_schema_holds_the_new_parts_and_refuses_them_misnamed(self):
        report = observed(grids=[{"grid": 4, "resumes": 3, "skipped": 2, "mismatch": None},
                                 {"grid": 8, "resumes": 0, "skipped": 1, "mismatch": None}], skip_reason=REASON,
                          batching={"batches": 2, "mismatch": {"prompt_number": 0, "prompt": [1], "beside": [[2]],
                                                               "difference": GENERATED}})
        errors = schema_errors(report)
        if errors is None:
            self.skipTest("jsonschema is not installed (pip install jsonschema): the schema is not checked")
        self.assertEqual(errors, [])
        import jsonschema
        schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
        j = json.loads(report.to_json())
        for broken in ({**j, "skip_reasons": REASON},
                       {k: v for k, v in j.items() if k != "skip_reason"},
                       {**j, "grids": [{k: v for k, v in g.items() if k != "skipped"} for g in j["grids"]]},
                       {**j, "batching": {**j["batching"], "mismatch": {**j["batching"]["mismatch"], "beside": []}}},
                       {**j, "batching": {"batches": 2}}):
            with self.subTest(broken=broken), self.assertRaises(jsonschema.ValidationError):
                jsonschema.validate(broken, schema)


if __name__ == "__main__":
    unittest.main()
