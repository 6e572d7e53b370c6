"""pfx.integrations.vllm on the models and scheduler settings people serve beyond the plugin suite's
full-attention Llama with vLLM's defaults, in vLLM's in-process mode with PFX_VLLM=1 and vLLM's own
kernels (PFX_VLLM_BATCH_INVARIANT=0: the one-token-step premise applies there, and cuts hits; this
suite's ctests set both, and PFX_VLLM_TEST_KIND, one kind a process); in bfloat16 (vllm.kind_hybrid_bf16) on
pfx's batch-invariant kernels, keep_min 96 cutting the hits, since vLLM's own kernels are refused there:

- ``hybrid``: a tiny Llama whose layer 0 attends over a sliding window of 64 positions and layer 1 in
  full: two KV cache groups, whose hits vLLM finds group by group;
- ``sliding``: every layer a sliding-window layer: one group of that kind;
- ``threshold``: the full-attention Llama with ``long_prefill_token_threshold`` 64, which vLLM drops
  for a request served alone;
- ``scheduled_cap``: the full-attention Llama with ``max_num_scheduled_tokens`` 64, vLLM's cap of a
  step below ``max_num_batched_tokens``.

The workloads are random chats, long turns that always resume, and regenerations whose hits the
one-token-step premise cuts a block below vLLM's, so that a hit is found again at a shorter length.

On each, every resumed response of generated multi-turn workloads equals its cold run, tokens and
logprobs, and vLLM's num_cached_tokens is a hit pfx's rule allows (aligned to the chunk, the
one-token-step premise of the step vLLM really takes, never a row decode wrote), at most the rule's
offset on vLLM's own hit (the plugin's decision counters give vLLM's hit in this process), equal to it
where the cut hit is all full attention, and the plugin keeps at least half of what stock vLLM would
reuse on the same requests (computed from the cache model, rows decode wrote included). The worker
computes with two threads."""
from __future__ import annotations

import os
import unittest

from support import SEED, verifies

import vllm_lane

WHY_NOT = vllm_lane.WHY_NOT
if not WHY_NOT:
    import pfx.integrations.vllm as plugin

KIND = os.environ.get("PFX_VLLM_TEST_KIND", "")
WINDOW = 64
STEP = 64
KINDS = {
    # kind: (layer types or None, engine overrides, vLLM's prefill step for a request served alone)
    "hybrid": (("sliding", "full"), {}, vllm_lane.MAX_NUM_BATCHED_TOKENS),
    "sliding": (("sliding", "sliding"), {}, vllm_lane.MAX_NUM_BATCHED_TOKENS),
    "threshold": (None, {"long_prefill_token_threshold": STEP}, vllm_lane.MAX_NUM_BATCHED_TOKENS),
    "scheduled_cap": (None, {"max_num_scheduled_tokens": STEP}, STEP),
}
STEPS = 10
WORKLOADS = 2


@unittest.skipIf(WHY_NOT or KIND not in KINDS, WHY_NOT or f"PFX_VLLM_TEST_KIND={KIND!r} names none of {sorted(KINDS)}")
class Kind(unittest.TestCase):
    llm = None

    @classmethod
    def setUpClass(cls):
        vllm_lane.expect_mode(plugin_on=True, in_process=True)
        settings = plugin.settings_from_environment()
        if settings.batch_invariant == (vllm_lane.DTYPE == "float32"):
            raise RuntimeError("this suite runs on vLLM's own kernels (PFX_VLLM_BATCH_INVARIANT=0) in float32, and on "
                               "pfx's batch-invariant kernels in bfloat16: its ctests set them")
        layer_types, overrides, cls.step = KINDS[KIND]
        # pfx's kernels need no step premise; keep_min (its ctest's) cuts the hits there instead.
        cls.step = 0 if settings.batch_invariant else cls.step
        cls.keep_min = settings.keep_min
        model = vllm_lane.tiny_model(layer_types=layer_types, sliding_window=WINDOW if layer_types else None)
        cls.llm = vllm_lane.start(model, **overrides)
        cls.full_attention = layer_types is None

    @verifies("VLLM-1 VLLM-2 VLLM-5 VLLM-6 INV-2 INV-12 THM-1")
    def test_every_resumed_response_equals_its_cold_run_and_takes_a_hit_the_rule_allows(self):
        resumed = reused = stock_reuse = 0
        # The random chats, the long turns (they resume whatever the chats drew) and the regenerations
        # (cut below vLLM's hit at every other step, so a hit is found again at a shorter length).
        generators = [vllm_lane.chat_workload] * WORKLOADS + [vllm_lane.long_turns, vllm_lane.regenerations]
        for workload, generator in enumerate(generators):
            seed = f"{SEED}:{KIND}:{workload}"
            outcome, stock = self.serve_workload(seed, generator)
            with self.subTest(workload=workload):
                self.assertEqual(outcome.differing, [], outcome.describe(seed))
                self.assertEqual(outcome.wrong_counts, [], outcome.describe(seed))
            resumed += outcome.resumed
            reused += outcome.reused_tokens
            stock_reuse += stock
        print(f"{KIND}: {resumed} resumed, {reused} tokens reused; stock vLLM would reuse {stock_reuse}")
        self.assertGreater(resumed, 0)  # compared something: the long turns resume whatever the chats drew
        cut = "lowered_for_the_prefill_step" if self.step else "below_keep_min"
        self.assertGreater(plugin.decisions()[cut], 0)  # and hits were cut, by the step premise or keep_min
        self.assertGreaterEqual(2 * reused, stock_reuse, "the plugin keeps less than half of stock vLLM's reuse")

    def serve_workload(self, seed, generator):
        """The workload served warm then cold, each warm hit checked against what the rule allows on
        vLLM's own hit; returns the outcome and what stock vLLM's cache would have given."""
        import random
        pfx_cache = vllm_lane.CacheModel(prompt_rows_only=True)
        stock_cache = vllm_lane.CacheModel(prompt_rows_only=False)
        outcome = vllm_lane.Outcome()
        stock = 0
        next_step = generator(random.Random(seed))
        response = ()
        self.assertTrue(self.llm.reset_prefix_cache())
        for number in range(STEPS):
            step = next_step(response)
            n = len(step.prompt)
            before = plugin.decisions()
            warm = vllm_lane.serve(self.llm, step.prompt)
            held = plugin.decisions()["tokens_held"] - before["tokens_held"]  # vLLM's own hit, before the cut
            reference = vllm_lane.cold(self.llm, step.prompt)
            allowed = vllm_lane.pfx_offset(held, n, vllm_lane.BLOCK, self.keep_min, self.step)
            bound = vllm_lane.pfx_offset(pfx_cache.hit(step.prompt), n, vllm_lane.BLOCK, self.keep_min, self.step)
            stock += stock_cache.hit(step.prompt)
            pfx_cache.served(step.prompt, reference.tokens)
            stock_cache.served(step.prompt, reference.tokens)
            outcome.steps += 1
            outcome.resumed += warm.cached > 0
            outcome.reused_tokens += warm.cached
            # A hit the rule allows: on the grid, within the rows a prefill wrote, the step premise held;
            # at most the rule's offset on vLLM's hit, equal to it where every group is full attention
            # (a sliding window's hit at a shorter length can be missing blocks the window needs).
            fits = (warm.cached % vllm_lane.BLOCK == 0 and warm.cached <= min(allowed, bound)
                    and vllm_lane.pfx_offset(warm.cached, n, vllm_lane.BLOCK, self.keep_min, self.step) == warm.cached
                    and (warm.cached == allowed or not self.full_attention))
            if not fits:
                outcome.wrong_counts.append((number, step.kind, warm.cached, (held, allowed, bound)))
            if (warm.tokens, warm.logprobs) != (reference.tokens, reference.logprobs):
                outcome.differing.append((number, step.kind, "tokens" if warm.tokens != reference.tokens
                                          else "logprobs"))
            response = warm.tokens
        return outcome, stock


if __name__ == "__main__":
    unittest.main()
