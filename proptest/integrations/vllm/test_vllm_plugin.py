"""pfx.integrations.vllm in vLLM's in-process mode, turned on as a user does, by PFX_VLLM=1 in the
environment (this suite's ctest sets it): vLLM loads the plugin through its vllm.general_plugins entry
point. Every resumed response of generated multi-turn workloads equals its cold run, tokens and
logprobs, and vLLM's num_cached_tokens is what pfx's rule allows, computed independently from the
requests (vllm_lane.CacheModel), never more. Under load too: requests batched together, sharing
prefill steps, and a request joining while another decodes each equal their cold run served alone,
since the plugin makes vLLM's CPU build compute batch invariantly (its attention's KV split off), and
a resume that ends with a one-token prefill step equals its cold run, so the rule needs no step
premise there. The worker computes with two threads."""
from __future__ import annotations

import importlib.metadata
import os
import unittest

from support import SEED, verifies

import vllm_lane

WHY_NOT = vllm_lane.WHY_NOT
if not WHY_NOT:
    import torch
    from vllm.v1.core.kv_cache_manager import KVCacheManager

    import pfx.integrations.vllm as plugin

STEPS = 14
WORKLOADS = 3
LONG_TURNS = 2  # workloads of long turns after the chats: every step resumes (vllm.stock's control)
BATCHED_ROUNDS = 3


@unittest.skipIf(WHY_NOT, WHY_NOT)
class PluginInProcess(unittest.TestCase):
    llm = None

    @classmethod
    def setUpClass(cls):
        vllm_lane.expect_mode(plugin_on=True, in_process=True)
        cls.llm = vllm_lane.start(vllm_lane.tiny_model())

    @verifies("VLLM-3")
    def test_vllm_loads_the_plugin_through_its_entry_point(self):
        names = [entry.value for entry in importlib.metadata.entry_points(group="vllm.general_plugins")]
        self.assertIn("pfx.integrations.vllm:register", names)
        self.assertIs(KVCacheManager.get_computed_blocks, plugin._get_computed_blocks)
        self.assertEqual(plugin._settings, plugin.Settings(chunk=None, keep_min=0, batch_invariant=True))
        # Batch invariance, set by the plugin (this suite's ctest does not set vLLM's variable), and so
        # no prefill-step premise: vLLM computes a one-token step as a longer one.
        self.assertEqual(os.environ.get("VLLM_CPU_ATTN_SPLIT_KV"), "0")
        self.assertIn("VLLM_CPU_ATTN_SPLIT_KV", plugin._set_by_pfx)
        config = self.llm.llm_engine.vllm_config
        self.assertEqual((plugin.prefill_step(config), plugin.admission_padding(config)), (0, 0))
        # The suite must see vLLM compute with two threads: with one, stock vLLM would not differ either.
        self.assertGreaterEqual(torch.get_num_threads(), 2)

    @verifies("VLLM-1 VLLM-2 INV-2 THM-1")
    def test_every_resumed_response_equals_its_cold_run_and_takes_what_the_rule_allows(self):
        resumed = 0
        for workload in range(WORKLOADS + LONG_TURNS):
            seed = f"{SEED}:in-process:{workload}"
            generator = vllm_lane.long_turns if workload >= WORKLOADS else vllm_lane.chat_workload
            outcome = vllm_lane.run_workload(
                self.llm, seed, STEPS, vllm_lane.CacheModel(prompt_rows_only=True),
                lambda hit, length: vllm_lane.pfx_offset(hit, length, vllm_lane.BLOCK, 0), generator)
            with self.subTest(workload=workload):
                self.assertEqual(outcome.differing, [], outcome.describe(seed))
                self.assertEqual(outcome.wrong_counts, [], outcome.describe(seed))
            resumed += outcome.resumed
        # Compared something: steps that resumed from the cache (the long turns resume, whatever
        # the random chats drew).
        self.assertGreater(resumed, 0)

    @verifies("VLLM-1 VLLM-2 VLLM-6 THM-1")
    def test_a_resume_that_ends_with_a_one_token_step_equals_its_cold_run(self):
        # With vLLM computing batch invariantly, a step of one prompt token computes as a longer one: the
        # rule takes every offset it allows, one-token last steps included (prefill steps of 256 tokens).
        # With vLLM's own kernels these resumes differ, and the step premise lowers them (the kinds suites).
        for length, expected in ((97, 96),     # one token left; the cold run's step is 97
                                 (257, 256),   # the cold run ends with a step of one token (256 + 1), as the resume
                                 (289, 288),   # one token left; the cold run's last step is 33
                                 (130, 128)):  # two tokens left
            prompt = tuple((7 * i + length) % 512 for i in range(length))
            reference = vllm_lane.cold(self.llm, prompt)
            again = vllm_lane.serve(self.llm, prompt)
            with self.subTest(length=length):
                self.assertEqual(again.cached, expected)
                self.assertEqual(vllm_lane.pfx_offset(length - 1, length, vllm_lane.BLOCK, 0), expected)
                self.assertEqual((again.tokens, again.logprobs), (reference.tokens, reference.logprobs))

    @verifies("VLLM-1 VLLM-9 THM-1")
    def test_requests_batched_together_or_joining_each_equal_their_cold_run_served_alone(self):
        outcome = vllm_lane.run_batched(self.llm, f"{SEED}:batched", BATCHED_ROUNDS)
        self.assertEqual(outcome.differing, [], outcome.describe(SEED))
        self.assertGreater(outcome.resumed, 0, outcome.describe(SEED))  # resumed requests were batched too

    @verifies("VLLM-2")
    def test_the_decisions_are_counted_by_reason(self):
        before = plugin.decisions()
        prompt = tuple(range(1, 100))
        vllm_lane.cold(self.llm, prompt)
        served = vllm_lane.serve(self.llm, prompt + (7, 8))
        after = plugin.decisions()
        self.assertEqual(served.cached, 96)  # the 99-token prompt's three whole blocks
        self.assertEqual(after["reused"] - before["reused"], 1)
        self.assertEqual(after["tokens_reused"] - before["tokens_reused"], 96)
        self.assertEqual(after["tokens_held"] - before["tokens_held"], 96)


if __name__ == "__main__":
    unittest.main()
