"""pfx.integrations.transformers.TransformersEngine on models whose layers do not all attend to every
row before: sliding-window layers (all of them, or beside full ones; windows below, at and above the
prefill chunk), chunked attention, and keys shared between layers; and the models whose cache cannot
be cut back to a row, refused when the engine is made (docs/engines.md, "Hugging Face transformers").
Each model is a tiny one of its family with random weights, written here (no download).

transformers caches a sliding layer in a DynamicSlidingWindowLayer, which drops the rows that leave
the window; the engine keeps every row and lets the model's mask apply the window. The properties:
a lane's responses (tokens, logits, the rows of the prompt) equal a cold lane's bit for bit over
random chats (hypothesis, unshrunk; PFX_PY_SEED replays a run, PFX_PY_EXAMPLES=<n> runs more
chats), and what the engine computes chunk by chunk is the model's own forward pass of the whole
prompt, window applied, for prompts several windows long.

Where torch, transformers or hypothesis cannot be imported, every test is skipped (and the suite
reports itself skipped, exit 77)."""
from __future__ import annotations

import os
import unittest

import pfx
from support import SEED, rng, verifies

try:
    import torch
    import transformers
    from hypothesis import HealthCheck, Phase, given, seed, settings, strategies as st
    from pfx.integrations.transformers import TransformersEngine
    torch.set_num_threads(1)  # the machine's cores are shared
    transformers.logging.set_verbosity_error()
    WHY_NOT = ""
except ImportError as error:
    WHY_NOT = f"torch, transformers and hypothesis cannot be imported ({error}); pip install '.[test,transformers]'"

CHUNK = 16
VOCAB = 128
NO_WINDOW = 4096  # a window no prompt here reaches: the same model attending to every row

# family: (model_type, the window's name in its config, the window, the config's other fields). The
# windows are below (8), at (16) and above (24, 32, 40) the chunk; every chat outgrows them.
FAMILIES = {
    # The model of the first report: Llama's attention takes no window whatever its layer_types say
    # (its mask is causal), yet transformers caches layer 0 as a sliding layer.
    "llama, sliding then full": ("llama", "sliding_window", 32,
                                 {"layer_types": ["sliding_attention", "full_attention"]}),
    "mistral, every layer sliding": ("mistral", "sliding_window", 8, {}),
    "qwen2, full then sliding (use_sliding_window)": ("qwen2", "sliding_window", 24,
                                                      {"use_sliding_window": True, "max_window_layers": 1}),
    "gemma2, sliding and full alternating (eager)": ("gemma2", "sliding_window", 16, {}),
    "gemma3, two sliding, one full": ("gemma3_text", "sliding_window", 40, {
        "num_hidden_layers": 3, "layer_types": ["sliding_attention", "sliding_attention", "full_attention"]}),
    "gpt-oss, sliding and full with sinks (eager)": ("gpt_oss", "sliding_window", 8,
                                                     {"num_local_experts": 2, "num_experts_per_tok": 1}),
    "llama4, chunked attention then full": ("llama4_text", "attention_chunk_size", 8, {
        "num_local_experts": 2, "interleave_moe_layer_step": 2, "intermediate_size_mlp": 128,
        "layer_types": ["chunked_attention", "full_attention"], "no_rope_layers": [1, 0]}),
    # Layers 2 and 3 read the keys and values of layers 0 and 1 (a DummyLayer in the cache).
    "gemma4, sliding and full, the last two sharing keys": ("gemma4_text", "sliding_window", 8, {
        "num_hidden_layers": 4, "num_kv_shared_layers": 2,
        "layer_types": ["sliding_attention", "full_attention", "sliding_attention", "full_attention"]}),
}

# The families whose cache transformers makes with layers that cannot be cut back to a row.
REFUSED = {
    "lfm2, convolution layers": ("lfm2", {"num_hidden_layers": 4,
                                          "layer_types": ["conv", "full_attention", "conv", "full_attention"]},
                                 r"Lfm2ForCausalLM's cache cannot be forgotten to a row or read row by row: layers "
                                 r"0, 2 \(conv, LinearAttentionLayer\) keep a recurrent state of all the rows before"),
    "recurrent gemma, two recurrent layers and a sliding one": (
        "recurrent_gemma", {"num_hidden_layers": 3, "sliding_window": 8},
        r"RecurrentGemmaForCausalLM's cache .*: layers 0, 1 \(linear_attention, LinearAttentionLayer\) keep a "
        r"recurrent state"),
    # transformers makes the cache from layer_types alone: an indexed layer, as DeepSeek V3.2 has.
    "a config naming an indexed-attention layer": (
        "llama", {"layer_types": ["full_attention", "indexed_attention"]},
        r"LlamaForCausalLM's cache .*: layer 1 \(indexed_attention, DynamicIndexedLayer\) keeps an indexer's keys"),
}


def tiny(model_type, seed=0, **fields):
    """A causal LM of `model_type`: hidden 64, 4 heads of 16, 2 key-value heads, vocabulary 128, random
    weights from `seed` (the same weights whatever its window), two layers unless `fields` say otherwise."""
    torch.manual_seed(seed)
    config = transformers.AutoConfig.for_model(
        model_type, **{"vocab_size": VOCAB, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
                       "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
                       "max_position_embeddings": 4096, **fields})
    return transformers.AutoModelForCausalLM.from_config(config).eval()


def family(name, window=None):
    model_type, window_field, default, fields = FAMILIES[name]
    return tiny(model_type, **{window_field: window or default, **fields})


def serve_chat(model, turns, enabled, max_new_tokens=4):
    """Each turn's response from a lane on its own engine, reuse `enabled` or not, and the engine's
    rows of the turn's prompt, the chat's history growing."""
    engine = TransformersEngine(model, chunk=CHUNK)
    lane = pfx.Lane(engine, keep_min=CHUNK, enabled=enabled)
    history, out = [], []
    for fresh in turns:
        prompt = history + fresh
        response = lane.serve(prompt, max_new_tokens)
        out.append((response, engine.read_rows(0, len(prompt))))
        history = prompt + response.generated
    return out


if not WHY_NOT:
    EXAMPLES = int(os.environ.get("PFX_PY_EXAMPLES") or 6)
    # No shrinking: each step would serve a chat twice, minutes on a wrong engine; the failing chat is
    # printed as drawn, and PFX_PY_SEED replays it.
    SETTINGS = settings(max_examples=EXAMPLES, deadline=None, database=None, print_blob=True,
                        phases=[Phase.explicit, Phase.generate],
                        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    TOKEN = st.integers(0, VOCAB - 1)
    # A first turn longer than the chunk, then turns of any length: prompts grow to a few windows.
    CHATS = st.tuples(st.lists(TOKEN, min_size=CHUNK + 1, max_size=60),
                      st.lists(st.lists(TOKEN, min_size=1, max_size=40), min_size=1, max_size=3))


@unittest.skipIf(WHY_NOT, WHY_NOT)
class SlidingAndSharedLayers(unittest.TestCase):
    models = {}

    @classmethod
    def setUpClass(cls):
        cls.models = {name: family(name) for name in FAMILIES}

    @verifies("PY-4 DRV-8 THM-1")
    def test_a_lane_with_reuse_answers_as_one_without_it_bit_for_bit(self):
        for name, model in self.models.items():
            with self.subTest(family=name):
                @seed(SEED)
                @SETTINGS
                @given(CHATS)
                def resumes_as_cold(chat):
                    turns = [chat[0], *chat[1]]
                    reused = serve_chat(model, turns, enabled=True)
                    cold = serve_chat(model, turns, enabled=False)
                    for turn, ((a, rows_a), (b, rows_b)) in enumerate(zip(reused, cold)):
                        self.assertEqual(a.generated, b.generated, f"turn {turn}")
                        self.assertEqual(bytes(a.logits), bytes(b.logits), f"turn {turn}")
                        self.assertEqual(rows_a, rows_b, f"turn {turn}: the rows of the prompt")
                        self.assertEqual(a.decision.offset % CHUNK, 0)
                    # The first prompt is longer than the chunk: every later turn resumes.
                    self.assertTrue(all(a.decision.offset > 0 for a, _ in reused[1:]), [a.decision for a, _ in reused])

                resumes_as_cold()

    @verifies("PY-4")
    def test_chunk_by_chunk_is_the_models_own_forward_pass_window_applied(self):
        # Resumes and cold runs would agree if the engine attended to rows outside the window on both
        # sides alike: the model's forward pass of the whole prompt, with no cache, says what each
        # token's logits are. The prompts are several windows long, and on each family but Llama's
        # (whose attention takes no window) the same weights without a window answer otherwise.
        r = rng(self)
        for name, model in self.models.items():
            with self.subTest(family=name):
                window = FAMILIES[name][2]
                prompt = [r.randrange(VOCAB) for _ in range(3 * max(window, CHUNK) + r.randrange(1, CHUNK))]
                engine = TransformersEngine(model, chunk=CHUNK)
                for start in range(0, len(prompt), CHUNK):
                    logits = engine.prefill(prompt[start:start + CHUNK], start)
                for _ in range(3):  # decodes, each one row past the last
                    token = int(logits.argmax())
                    logits = engine.decode(token, len(prompt))
                    prompt.append(token)
                unwindowed_model = family(name, window=NO_WINDOW)
                self.assertTrue(all(torch.equal(a, b) for a, b in zip(model.state_dict().values(),
                                                                      unwindowed_model.state_dict().values())))
                with torch.no_grad():
                    whole = model(torch.tensor([prompt]), use_cache=False).logits[0, -1]
                    unwindowed = unwindowed_model(torch.tensor([prompt]), use_cache=False).logits[0, -1]
                gap = (torch.from_numpy(logits) - whole).abs().max().item()
                self.assertLess(gap, 1e-4, f"the engine's logits are {gap} from the model's own forward pass")
                window_matters = (whole - unwindowed).abs().max().item()
                if name.startswith("llama,"):
                    self.assertEqual(window_matters, 0.0, "Llama's attention takes no window")
                else:
                    self.assertGreater(window_matters, 1e-3, "the prompt does not reach past the window")

    @verifies("PY-4 DRV-9")
    def test_verify_compares_every_response_rows_included(self):
        r = rng(self)
        for name, model in self.models.items():
            with self.subTest(family=name):
                history, trace = [], []
                for turn in range(4):
                    history = history + [r.randrange(VOCAB) for _ in range(r.randrange(20, 50) if turn == 0 else
                                                                           r.randrange(5, 30))]
                    trace.append((list(history), 3))
                report = pfx.verify(TransformersEngine(model, chunk=CHUNK), trace, keep_min=CHUNK)
                self.assertTrue(report.ok, str(report))
                self.assertEqual(report.compared, len(trace))
                self.assertGreater(report.rows_compared, 0)
                self.assertGreater(report.reused_tokens, 0)

    @verifies("PY-4 DRV-8 CONF-3")
    def test_conform_calls_the_chunk_safe(self):
        # The quick budget's prompts reach 49 tokens, past every window here but gemma3's (40).
        for name, model in self.models.items():
            with self.subTest(family=name):
                report = pfx.conform(TransformersEngine(model, chunk=CHUNK), budget="quick")
                self.assertIsNone(report.premise_failure)
                self.assertTrue(report.deterministic, str(report))
                self.assertEqual(report.verdict, "safe", str(report))
                self.assertTrue(report.grid(CHUNK).exact, str(report))
                self.assertFalse(report.grid(1).exact, str(report))

    @verifies("PY-4")
    def test_the_cache_keeps_every_row_and_reads_each_once(self):
        model = self.models["gemma4, sliding and full, the last two sharing keys"]
        engine = TransformersEngine(model, chunk=CHUNK)
        self.assertEqual([type(layer).__name__ for layer in engine.cache.layers],
                         ["DynamicLayer", "DynamicLayer", "DummyLayer", "DummyLayer"])
        prompt = list(range(40))  # five windows
        for start in range(0, len(prompt), CHUNK):
            engine.prefill(prompt[start:start + CHUNK], start)
        self.assertEqual(engine.cache.get_seq_length(), 40)
        # rows x {K, V} x 2 kv heads x (head dim 16 of layer 0 + 512 of layer 1, Gemma4's full layers'),
        # float32: layers 2 and 3 hold no rows
        self.assertEqual(len(engine.read_rows(0, 40)), 40 * 2 * 2 * (16 + 512) * 4)
        first = engine.read_rows(0, 8)
        engine.forget(8)  # back inside the first window, which a sliding layer of transformers no longer holds
        self.assertEqual(engine.cache.get_seq_length(), 8)
        self.assertEqual(engine.read_rows(0, 8), first)
        engine.prefill(prompt[8:24], 8)
        self.assertEqual(engine.cache.get_seq_length(), 24)

    @verifies("PY-4")
    def test_a_cache_that_cannot_be_cut_to_a_row_is_refused_when_the_engine_is_made(self):
        for name, (model_type, fields, message) in REFUSED.items():
            with self.subTest(family=name):
                model = tiny(model_type, **fields)
                with self.assertRaisesRegex(ValueError, "TransformersEngine: " + message):
                    TransformersEngine(model, chunk=CHUNK)


if __name__ == "__main__":
    unittest.main()
