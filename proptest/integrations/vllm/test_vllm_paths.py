"""pfx.integrations.vllm on the paths by which vLLM could cache a row that decode wrote, in vLLM's
in-process mode with PFX_VLLM=1 (this suite's ctest sets it), on an engine whose KV cache holds 40
blocks, so that two requests at once do not fit:

- preemption and recompute: a request preempted mid-decode is computed again from its prompt and
  output, by a prefill, and then decodes on;
- ``reset_prefix_cache(reset_running_requests=True)`` with a request running: vLLM preempts it, resets,
  and computes it again.

After each, a request that extends the prompt by its output (but the last token, which has no row)
takes from the cache no more than the rule allows on the prompt's own rows, at least one block
(something was compared), and answers as its cold run. Stock vLLM would offer the rows computed for
the output too. (Streaming sessions, which need vLLM's asynchronous engine, are tested in the
multiprocess suite.)"""
from __future__ import annotations

import unittest
from unittest import mock

from support import verifies

import vllm_lane

WHY_NOT = vllm_lane.WHY_NOT
if not WHY_NOT:
    import vllm
    from vllm.inputs import TokensPrompt
    from vllm.v1.core.sched.scheduler import Scheduler

BLOCKS = 40
MAX_MODEL_LEN = 1024
BYTES_PER_TOKEN = 2 * 2 * 2 * 32 * 4  # layers x (key, value) x KV heads x head size x float32


def extension(prompt, output, extra=(5, 6, 7)):
    """The prompt, its output but the last token, and more: the rows a cache could hold for it, and
    a few tokens to compute."""
    return tuple(prompt) + tuple(output[:-1]) + tuple(extra)


@unittest.skipIf(WHY_NOT, WHY_NOT)
class Paths(unittest.TestCase):
    llm = None

    @classmethod
    def setUpClass(cls):
        vllm_lane.expect_mode(plugin_on=True, in_process=True)
        cls.llm = vllm_lane.start(vllm_lane.tiny_model(), max_model_len=MAX_MODEL_LEN,
                                  kv_cache_memory_bytes=BLOCKS * vllm_lane.BLOCK * BYTES_PER_TOKEN)

    def assert_only_prompt_rows_are_offered(self, prompt, output):
        """The extension of `prompt` by `output` takes what the rule allows on the prompt's rows, which
        the cache must hold, and equals its cold run."""
        extended = extension(prompt, output)
        warm = vllm_lane.serve(self.llm, extended, 4)
        expected = vllm_lane.pfx_offset(len(prompt) // vllm_lane.BLOCK * vllm_lane.BLOCK, len(extended),
                                        vllm_lane.BLOCK, 0)
        self.assertGreater(expected, 0)
        self.assertEqual(warm.cached, expected, "rows computed for the output were offered, or the prompt's were not")
        cold = vllm_lane.cold(self.llm, extended, 4)
        self.assertEqual((warm.tokens, warm.logprobs), (cold.tokens, cold.logprobs))

    @verifies("VLLM-1 VLLM-7 INV-2")
    def test_a_preempted_and_recomputed_request_caches_only_its_prompts_rows(self):
        preempted = []
        original = Scheduler._preempt_request

        def preempt(scheduler, request, *args, **kwargs):
            preempted.append(request.request_id)
            return original(scheduler, request, *args, **kwargs)

        self.assertTrue(self.llm.reset_prefix_cache())
        prompts = [tuple((11 * i + seed) % 512 for i in range(500)) for seed in (1, 2)]
        params = vllm.SamplingParams(max_tokens=240, temperature=0.0, ignore_eos=True, detokenize=False)
        with mock.patch.object(Scheduler, "_preempt_request", preempt):
            outputs = self.llm.generate([TokensPrompt(prompt_token_ids=list(p)) for p in prompts], params,
                                        use_tqdm=False)
        self.assertTrue(preempted, "two requests of 740 tokens fit a cache of 1280: nothing was preempted")
        # The request preempted last was computed again last: its blocks are the cache's newest. (vLLM's
        # own request id is the caller's, then a suffix of its own.)
        last = [i for i, out in enumerate(outputs) if preempted[-1].startswith(f"{out.request_id}-")]
        self.assertEqual(len(last), 1, (preempted, [out.request_id for out in outputs]))
        self.assert_only_prompt_rows_are_offered(prompts[last[0]], outputs[last[0]].outputs[0].token_ids)

    @verifies("VLLM-1 VLLM-7 INV-2")
    def test_a_reset_with_a_request_running_caches_only_its_prompts_rows(self):
        self.assertTrue(self.llm.reset_prefix_cache())
        engine = self.llm.llm_engine
        prompt = tuple((13 * i + 3) % 512 for i in range(300))
        params = vllm.SamplingParams(max_tokens=64, temperature=0.0, ignore_eos=True, detokenize=False)
        engine.add_request("running", TokensPrompt(prompt_token_ids=list(prompt)), params)
        steps = 0
        while steps < 12:  # the prefill (two steps of 256) and some decode steps
            engine.step()
            steps += 1
        self.assertTrue(self.llm.reset_prefix_cache(reset_running_requests=True))
        finished = None
        while engine.has_unfinished_requests():
            for out in engine.step():
                if out.finished:
                    finished = out
        self.assertIsNotNone(finished)
        self.assertEqual(len(finished.outputs[0].token_ids), 64)
        self.assert_only_prompt_rows_are_offered(prompt, finished.outputs[0].token_ids)


if __name__ == "__main__":
    unittest.main()
