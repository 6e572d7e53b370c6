"""vLLM without the plugin (PFX_VLLM unset), in-process, its worker computing with two threads: vLLM
is unchanged (its own KV cache manager, its own reuse, rows decode wrote included), and the same
workloads the plugin's suite passes differ from their cold runs, so that suite can fail."""
from __future__ import annotations

import unittest

from support import SEED, verifies

import vllm_lane

WHY_NOT = vllm_lane.WHY_NOT
if not WHY_NOT:
    import torch
    from vllm.v1.core.kv_cache_coordinator import KVCacheCoordinator
    from vllm.v1.core.kv_cache_manager import KVCacheManager

    import pfx.integrations.vllm as plugin

STEPS = 14
WORKLOADS = 3
LONG_TURNS = 2
CONTROL_ROUNDS = 40  # at most: the batched control stops at the first round that differs


@unittest.skipIf(WHY_NOT, WHY_NOT)
class StockInProcess(unittest.TestCase):
    llm = None

    @classmethod
    def setUpClass(cls):
        vllm_lane.expect_mode(plugin_on=False, in_process=True)
        cls.llm = vllm_lane.start(vllm_lane.tiny_model())

    @verifies("VLLM-3")
    def test_with_the_plugin_off_vllm_runs_its_own_code(self):
        self.assertEqual(plugin._originals, {})
        self.assertIsNone(plugin._settings)
        self.assertEqual(KVCacheManager.get_computed_blocks.__module__, "vllm.v1.core.kv_cache_manager")
        self.assertEqual(KVCacheCoordinator.cache_blocks.__module__, "vllm.v1.core.kv_cache_coordinator")
        self.assertGreaterEqual(torch.get_num_threads(), 2)

    @verifies("VLLM-1 VLLM-3")
    def test_stock_vllm_reuses_rows_decode_wrote_and_its_resumed_turns_differ_from_cold(self):
        differing = resumed = 0
        # The plugin suite's workloads, the long turns last: they resume at every step, over rows decode
        # wrote, and stock differs in 2 to 7 of 13 such resumes a seed in float32 (18 of 52 over seeds 0
        # to 3): two of them leave a quiet draw about 0.65^26, under 1e-4, were resumes independent.
        for workload in range(WORKLOADS + LONG_TURNS):
            seed = f"{SEED}:in-process:{workload}"
            generator = vllm_lane.long_turns if workload >= WORKLOADS else vllm_lane.chat_workload
            outcome = vllm_lane.run_workload(
                self.llm, seed, STEPS, vllm_lane.CacheModel(prompt_rows_only=False), lambda hit, length: hit,
                generator)
            with self.subTest(workload=workload):
                # vLLM's own rule, unchanged: every whole matching block, rows decode wrote included.
                self.assertEqual(outcome.wrong_counts, [], outcome.describe(seed))
            differing += len(outcome.differing)
            resumed += outcome.resumed
        print(f"stock vLLM ({vllm_lane.DTYPE}): {differing} of {resumed} resumed responses differ from their cold runs")
        vllm_lane.skip_if_stock_alone_is_exact_in_bfloat16(self, differing, resumed)
        self.assertGreater(differing, 0, "stock vLLM answered every resumed turn as its cold run: the plugin's "
                                         "suite could not fail on these workloads")

    @verifies("VLLM-9")
    def test_stock_vllm_changes_a_requests_answer_with_what_is_batched_beside_it(self):
        # vLLM's own kernels (its CPU attention splits a request's KV by the whole step's work): the
        # plugin suite's batched rounds differ here, so that suite could fail.
        # The plugin suite's rounds are drawn alike; up to 40 are served here, stopping at the first that
        # differs, since a few rounds in bfloat16 are all quiet now and then (vllm_lane.run_batched).
        outcome = vllm_lane.run_batched(self.llm, f"{SEED}:batched", CONTROL_ROUNDS, until_one_differs=True)
        print(f"stock vLLM under load: {len(outcome.differing)} of {outcome.steps} responses differ from their cold "
              f"run served alone")
        self.assertGreater(len(outcome.differing), 0, "stock vLLM answered every batched request as served alone: "
                                                     "the plugin's batched test could not fail here")


if __name__ == "__main__":
    unittest.main()
