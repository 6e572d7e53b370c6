"""pfx.integrations.transformers.TransformersEngine: a transformers causal LM (a tiny LlamaForCausalLM
with random weights, written here: no download) driven through its own DynamicCache by pfx.Lane,
pfx.conform and pfx.verify (docs/python.md, "transformers"). On CPU its resumes on multiples of the
prefill chunk equal cold runs bit for bit; the rule of chunk 1 resumes off that grid and differs.

Where torch or transformers cannot be imported, every test is skipped (and the suite reports itself
skipped, exit 77)."""
from __future__ import annotations

import unittest

import pfx
from support import rng, verifies

try:
    import torch
    import transformers
    from pfx.integrations.transformers import TransformersEngine
    torch.set_num_threads(1)  # the machine's cores are shared
    WHY_NOT = ""
except ImportError as error:
    WHY_NOT = f"torch and transformers cannot be imported ({error}); pip install torch transformers"

CHUNK = 16


def tiny_llama(seed=0, hidden=64, kv_heads=2):
    """Two layers, vocabulary 128, grouped-query attention (4 heads, kv_heads of them for keys and
    values), random weights from `seed`."""
    torch.manual_seed(seed)
    config = transformers.LlamaConfig(vocab_size=128, hidden_size=hidden, intermediate_size=2 * hidden,
                                      num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=kv_heads,
                                      max_position_embeddings=4096)
    return transformers.LlamaForCausalLM(config).eval()


def chat(r, turns=5):
    """The new tokens of each turn of a conversation (a system prompt, then user turns)."""
    return [[r.randrange(128) for _ in range(r.randrange(20, 60) if t == 0 else r.randrange(5, 30))]
            for t in range(turns)]


def serve_chat(lane, turns, max_new_tokens=6):
    history, out = [], []
    for fresh in turns:
        prompt = history + fresh
        response = lane.serve(prompt, max_new_tokens)
        out.append(response)
        history = prompt + response.generated
    return out


@unittest.skipIf(WHY_NOT, WHY_NOT)
class Transformers(unittest.TestCase):
    model = None

    @classmethod
    def setUpClass(cls):
        cls.model = tiny_llama()

    @verifies("PY-4 DRV-8 CONF-3")
    def test_conform_calls_the_chunk_safe(self):
        report = pfx.conform(TransformersEngine(self.model, chunk=CHUNK))
        self.assertIsNone(report.premise_failure)
        self.assertTrue(report.deterministic, str(report))
        self.assertEqual(report.verdict, "safe", str(report))
        self.assertTrue(report.grid(CHUNK).exact)
        # Measured on this model on CPU: a resume at an offset off the chunk's grid computes its first
        # chunk in a call of another shape, and its rows differ (docs/python.md, "transformers").
        self.assertFalse(report.grid(1).exact, str(report))

    @verifies("PY-4 DRV-8 THM-1")
    def test_a_lane_with_reuse_answers_as_one_without_it_bit_for_bit(self):
        r = rng(self)
        for seed, kv_heads in ((0, 2), (1, 4)):
            model = self.model if seed == 0 else tiny_llama(seed, hidden=32, kv_heads=kv_heads)
            turns = chat(r)
            with self.subTest(seed=seed, kv_heads=kv_heads):
                reused = serve_chat(pfx.Lane(TransformersEngine(model, chunk=CHUNK), keep_min=16, capacity=4096), turns)
                cold = serve_chat(pfx.Lane(TransformersEngine(model, chunk=CHUNK), keep_min=16, capacity=4096,
                                           enabled=False), turns)
                for a, b in zip(reused, cold):
                    self.assertEqual(a.generated, b.generated)
                    self.assertEqual(bytes(a.logits), bytes(b.logits))
                self.assertTrue(all(a.decision.offset > 0 for a in reused[1:]), [a.decision for a in reused])
                self.assertTrue(all(a.decision.offset % CHUNK == 0 for a in reused))

    @verifies("PY-4 CEX-1")
    def test_the_rule_of_chunk_1_differs_from_cold(self):
        turns = chat(rng(self), turns=6)
        engine = TransformersEngine(self.model, chunk=CHUNK)
        off = serve_chat(pfx.Lane(engine, keep_min=1, capacity=4096, rule_chunk=1), turns)
        cold = serve_chat(pfx.Lane(TransformersEngine(self.model, chunk=CHUNK), capacity=4096, enabled=False), turns)
        self.assertTrue(any(a.decision.offset % CHUNK for a in off[1:]))
        self.assertTrue(any(bytes(a.logits) != bytes(b.logits) for a, b in zip(off, cold)))

    @verifies("DRV-9 PY-4")
    def test_verify_compares_every_response_rows_included(self):
        history, trace = [], []
        for fresh in chat(rng(self)):
            history = history + fresh
            trace.append((list(history), 4))
        good = pfx.verify(TransformersEngine(self.model, chunk=CHUNK), trace, keep_min=16, capacity=4096)
        self.assertTrue(good.ok, str(good))
        self.assertEqual(good.compared, len(trace))
        self.assertGreater(good.rows_compared, 0)
        self.assertGreater(good.reused_tokens, 0)
        off = pfx.verify(TransformersEngine(self.model, chunk=CHUNK), trace, keep_min=1, capacity=4096, rule_chunk=1)
        self.assertFalse(off.ok, str(off))

    @verifies("PY-4")
    def test_each_call_runs_at_the_positions_it_writes(self):
        # A lane's resumes and cold runs would agree bit for bit even if every call took positions from
        # 0: both sides would be wrong alike. The model's own forward pass of the whole prompt says
        # what the logits are; the adapter's chunks, each at its rows' positions over the rows before
        # it, give them to float rounding (a chunk sums in another order).
        r = rng(self)
        prompt = [r.randrange(128) for _ in range(3 * CHUNK + r.randrange(1, CHUNK))]
        engine = TransformersEngine(self.model, chunk=CHUNK)
        for start in range(0, len(prompt), CHUNK):
            logits = engine.prefill(prompt[start:start + CHUNK], start)
        with torch.no_grad():
            whole = self.model(torch.tensor([prompt])).logits[0, -1]
        gap = (torch.from_numpy(logits) - whole).abs().max().item()
        self.assertLess(gap, 1e-4, f"the chunked prefill's logits are {gap} from the model's one forward pass")

    @verifies("PY-4")
    def test_the_adapter_keeps_to_the_protocol(self):
        engine = TransformersEngine(self.model, chunk=CHUNK)
        self.assertEqual((engine.chunk, engine.vocab, engine.capacity), (CHUNK, 128, 4096))
        logits = engine.prefill(list(range(10)), 0)
        self.assertEqual((logits.dtype.name, logits.shape), ("float32", (128,)))
        # rows x layers x {K, V} x kv heads x head dim, float32
        self.assertEqual(len(engine.read_rows(0, 10)), 10 * 2 * 2 * 2 * 16 * 4)
        self.assertEqual(engine.read_rows(3, 5), engine.read_rows(0, 10)[3 * 512:5 * 512])
        self.assertEqual(engine.read_each_row(2, 6), [engine.read_rows(p, p + 1) for p in range(2, 6)])
        self.assertEqual(engine.read_each_row(4, 4), [])
        with self.assertRaisesRegex(ValueError, "holds 10 rows"):
            engine.prefill([1], 4)
        engine.forget(4)
        self.assertEqual(engine.cache.get_seq_length(), 4)
        engine.decode(7, 4)
        engine.forget(0)
        self.assertEqual(engine.cache.get_seq_length(), 0)
        with self.assertRaisesRegex(ValueError, "chunk"):
            TransformersEngine(self.model, chunk=0)


    @verifies("PY-4")
    def test_without_a_capacity_a_lane_and_verify_take_the_models_context(self):
        # The docs' model: a default LlamaConfig's context is 2048 positions, less than pfx's 4096.
        torch.manual_seed(2)
        config = transformers.LlamaConfig(vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                          num_attention_heads=4, num_key_value_heads=2)
        model = transformers.LlamaForCausalLM(config).eval()
        engine = TransformersEngine(model, chunk=CHUNK)
        self.assertEqual(engine.capacity, config.max_position_embeddings)
        lane = pfx.Lane(engine, keep_min=16)
        self.assertEqual(lane.capacity, config.max_position_embeddings)
        self.assertEqual(len(lane.serve(list(range(40)), 2).generated), 2)
        report = pfx.verify(TransformersEngine(model, chunk=CHUNK), [list(range(40)), list(range(60))], keep_min=16)
        self.assertTrue(report.ok, str(report))

    @verifies("PY-4")
    def test_what_is_not_a_causal_lm_is_refused_naming_the_model(self):
        config = self.model.config
        with self.assertRaisesRegex(ValueError, "LlamaModel has no language-model head, so it returns no logits: "
                                                "pass its causal LM"):
            TransformersEngine(transformers.LlamaModel(config), chunk=CHUNK)
        with self.assertRaisesRegex(TypeError, "model must be a transformers causal LM .*, got object"):
            TransformersEngine(object(), chunk=CHUNK)
        with self.assertRaisesRegex(TypeError, r"chunk must be an int >= 1, got str \('16'\)"):
            TransformersEngine(self.model, chunk="16")
        with self.assertRaisesRegex(ValueError, "capacity must be an int >= 1, got 0"):
            TransformersEngine(self.model, chunk=CHUNK, capacity=0)


if __name__ == "__main__":
    unittest.main()
