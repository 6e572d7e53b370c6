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

import dataclasses
import importlib.metadata
import os
import random
import time
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

    @verifies("VLLM-9")
    def test_the_attention_sees_each_query_token_as_a_request_whose_context_ends_at_it(self):
        from vllm.v1.attention.backend import CommonAttentionMetadata

        from pfx.integrations.vllm import attention
        self.assertTrue(attention.installed())  # the plugin installed it when it loaded
        # A step of three requests: 3 queries over 10 rows (7 cached), 1 over 5 (decoding), 4 over 4.
        starts = torch.tensor([0, 3, 4, 8], dtype=torch.int32)
        tables = torch.tensor([[1, 2], [3, 0], [4, 0]], dtype=torch.int32)
        step = CommonAttentionMetadata(
            query_start_loc=starts, query_start_loc_cpu=starts, seq_lens=torch.tensor([10, 5, 4], dtype=torch.int32),
            num_reqs=3, num_actual_tokens=8, max_query_len=4, max_seq_len=10, block_table_tensor=tables,
            slot_mapping=torch.arange(8))
        tokens = attention.per_token(step)
        self.assertEqual((tokens.num_reqs, tokens.max_query_len, tokens.num_actual_tokens), (8, 1, 8))
        self.assertEqual(tokens.query_start_loc.tolist(), list(range(9)))
        self.assertEqual(tokens.seq_lens.tolist(), [8, 9, 10, 5, 1, 2, 3, 4])  # each token's own row is its last
        self.assertEqual(tokens.block_table_tensor.tolist(), [[1, 2]] * 3 + [[3, 0]] + [[4, 0]] * 4)
        self.assertTrue(torch.equal(tokens.slot_mapping, step.slot_mapping))  # where rows are written: as it was
        # A step of decodes alone is one query a request already.
        decodes = dataclasses.replace(step, query_start_loc=torch.arange(4, dtype=torch.int32), num_actual_tokens=3,
                                      max_query_len=1)
        self.assertIs(attention.per_token(decodes), decodes)

    @verifies("VLLM-1 VLLM-9 THM-1")
    def test_a_long_context_resumed_at_any_block_equals_its_cold_run(self):
        # vLLM's CPU attention tiles a step's queries from the step's first token and sizes its tiles of
        # keys by them: past a tile of keys, a token's attention was summed in another order when its step
        # started elsewhere, and resumes of 2,000 to 3,500 tokens on the block grid differed from their
        # cold runs (6 of 18 such draws, steps of 256 tokens). pfx's attention computes every token as a
        # decode step (pfx.integrations.vllm.attention): none differs.
        draw = random.Random(f"{SEED}:long contexts")
        compared = 0
        started = time.monotonic()
        for length in (2000, 2500, 3000, 3500, 2000, 2500, 3000, 3500, 2000, 2500, 3000, 3500, 2000, 2500, 3000, 3500,
                       2250, 3250):
            prompt = [draw.randrange(512) for _ in range(length)]
            held = draw.randrange(1, length // vllm_lane.BLOCK) * vllm_lane.BLOCK
            reference = vllm_lane.cold(self.llm, prompt, 4)
            vllm_lane.cold(self.llm, prompt[:held] + [(prompt[held] + 1) % 512], 1)
            resumed = vllm_lane.serve(self.llm, prompt, 4)
            with self.subTest(length=length, held=held):
                self.assertEqual(resumed.cached, held)
                self.assertEqual((resumed.tokens, resumed.logprobs), (reference.tokens, reference.logprobs))
            compared += 1
        print(f"{compared} resumes of 2,000 to 3,500 tokens against their cold runs, "
              f"{time.monotonic() - started:.1f} s")

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
