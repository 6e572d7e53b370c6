"""pfx.integrations.vllm in vLLM's default multiprocess mode, turned on in code by
pfx.integrations.vllm.enable(chunk=64, keep_min=96) before vllm.LLM: the scheduler runs in vLLM's
engine-core process, where the plugin is loaded through the entry point and reads the variables
enable() set, so a patch of this process alone would change nothing. Resumed responses equal their
cold runs and take what the rule allows on a grid of two blocks. A streaming session (vLLM's
asynchronous engine, whose session appends each output to its prompt) caches no row decode wrote. A
malformed knob, a chunk off vLLM's block grid, a configuration the plugin cannot vouch for and an
untested vLLM version stop vLLM's start, before the model loads, with an error that names them; so
does a vLLM that would run without the plugin while PFX_VLLM asks for it."""
from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
import unittest
from unittest import mock

from support import SEED, verifies

import vllm_lane

WHY_NOT = vllm_lane.WHY_NOT
if not WHY_NOT:
    import vllm

    import pfx
    import pfx.integrations.vllm as plugin

CHUNK = 2 * vllm_lane.BLOCK
KEEP_MIN = 3 * vllm_lane.BLOCK
STEPS = 12

# A vLLM start in a fresh process, with the environment given; prints STARTED when it got that far.
STARTED = "pfx test: the vLLM engine started"
START = textwrap.dedent("""
    import sys
    sys.path.insert(0, {here!r})
    import vllm_lane
    vllm_lane.start({model!r}, **{overrides!r})
    print({started!r})
""")


LOADED = "Loading safetensors checkpoint shards"  # vLLM's line when it loads the model's weights


def start_in_a_process(model, overrides=None, **variables):
    """vllm_lane.start(model, **overrides) in a fresh process with `variables` over this one's environment
    (pfx's and VLLM_PLUGINS left out)."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("PFX_VLLM") and k != "VLLM_PLUGINS"}
    environment.update(variables)
    script = START.format(here=os.path.dirname(os.path.abspath(__file__)), model=model, started=STARTED,
                          overrides=overrides or {})
    return subprocess.run([sys.executable, "-c", script], env=environment, capture_output=True, text=True,
                          timeout=600)


@unittest.skipIf(WHY_NOT, WHY_NOT)
class PluginMultiprocess(unittest.TestCase):
    llm = None

    @classmethod
    def setUpClass(cls):
        vllm_lane.expect_mode(plugin_on=False, in_process=False)
        plugin.enable(chunk=CHUNK, keep_min=KEEP_MIN)
        cls.llm = vllm_lane.start(vllm_lane.tiny_model())

    @classmethod
    def tearDownClass(cls):
        plugin.disable()

    @verifies("VLLM-1 VLLM-2 VLLM-3 INV-2 INV-4 INV-5 THM-1")
    def test_the_engine_core_process_applies_the_rule_enable_asked_for(self):
        resumed = 0
        for workload, generator in enumerate((vllm_lane.chat_workload, vllm_lane.chat_workload, vllm_lane.long_turns)):
            seed = f"{SEED}:multiprocess:{workload}"
            outcome = vllm_lane.run_workload(
                self.llm, seed, STEPS, vllm_lane.CacheModel(prompt_rows_only=True),
                lambda hit, length: vllm_lane.pfx_offset(hit, length, CHUNK, KEEP_MIN), generator)
            with self.subTest(workload=workload):
                self.assertEqual(outcome.differing, [], outcome.describe(seed))
                self.assertEqual(outcome.wrong_counts, [], outcome.describe(seed))
            resumed += outcome.resumed
        # Compared something: the long turns resume (a random chat may, by chance, never resume
        # at chunk 64 and keep_min 96).
        self.assertGreater(resumed, 0)

    @verifies("VLLM-3 VLLM-8")
    def test_a_malformed_knob_or_a_chunk_off_the_block_grid_stops_vllms_start_before_the_model_loads(self):
        model = vllm_lane.tiny_model()
        for variables, expected in (
                ({"PFX_VLLM_CHUNK": "abc"}, 'PFX_VLLM_CHUNK="abc" is malformed: expected a count of tokens >= 1, a '
                                            "multiple of vLLM's block size"),
                ({"PFX_VLLM_KEEP_MIN": "-3"}, 'PFX_VLLM_KEEP_MIN="-3" is malformed: expected a count of tokens >= 0'),
                ({"PFX_VLLM_CHUNK": "48"}, "pfx.Refused: pfx's vLLM plugin refuses this configuration: "
                                           "PFX_VLLM_CHUNK=48 is not a multiple of vLLM's block size 32"),
                ({"PFX_VLLM_BATCH_INVARIANT": "sometimes"}, 'PFX_VLLM_BATCH_INVARIANT="sometimes" is malformed: '
                                                            "expected 1, true, on, yes, empty or unset"),
                # vLLM told to split its attention's KV while pfx is asked for batch invariance: refused, not
                # overridden either way.
                ({"VLLM_CPU_ATTN_SPLIT_KV": "1"}, "VLLM_CPU_ATTN_SPLIT_KV=1 makes a request's answer depend on what "
                                                  "vLLM batches beside it, and PFX_VLLM_BATCH_INVARIANT"),
                ({"PFX_VLLM": "maybe"}, 'PFX_VLLM="maybe" is malformed: expected 1, true, on, yes or empty (the plugin '
                                        "on: pfx's rule decides how much of each prompt vLLM takes from its prefix "
                                        "cache) or 0, false, off or no (the plugin off: vLLM's own prefix caching, "
                                        "unchanged)"),
                # The list names pfx's plugin: vLLM loads it, and its check of the configuration refuses the chunk.
                ({"PFX_VLLM_CHUNK": "48", "VLLM_PLUGINS": "other,pfx"},
                 "pfx.Refused: pfx's vLLM plugin refuses this configuration: PFX_VLLM_CHUNK=48 is not a multiple "
                 "of vLLM's block size 32")):
            with self.subTest(**variables):
                ran = start_in_a_process(model, **{"PFX_VLLM": "1", **variables})
                self.assertNotEqual(ran.returncode, 0, ran.stdout[-5000:])
                self.assertNotIn(STARTED, ran.stdout)
                self.assertNotIn(LOADED, ran.stdout + ran.stderr)
                self.assertIn(expected, ran.stdout + ran.stderr)

    @verifies("VLLM-3 VLLM-8")
    def test_torch_compile_over_the_batch_invariant_layers_stops_vllms_start_by_name_before_the_model_loads(self):
        # vLLM's torch.compile cannot trace pfx's batch-invariant linear layers and would fail at its first
        # step, after the model loaded; with vLLM's own kernels (which it compiles) it runs code no premise
        # was measured on: refused by name either way, with what to do.
        prefix = ("pfx.Refused: pfx's vLLM plugin refuses this configuration: vLLM compiles the model with "
                  "torch.compile (compilation mode DYNAMO_TRACE_ONCE), ")
        for variables, why in (({}, "which cannot trace pfx's batch-invariant linear layers"),
                               ({"PFX_VLLM_BATCH_INVARIANT": "0"}, "whose generated kernels compute otherwise")):
            with self.subTest(**variables):
                ran = start_in_a_process(vllm_lane.tiny_model(), {"enforce_eager": False}, PFX_VLLM="1", **variables)
                self.assertNotEqual(ran.returncode, 0, ran.stdout[-5000:])
                self.assertNotIn(STARTED, ran.stdout)
                self.assertNotIn(LOADED, ran.stdout + ran.stderr)
                self.assertIn(prefix + why, ran.stdout + ran.stderr)
                self.assertIn("start vLLM eagerly: --enforce-eager", ran.stdout + ran.stderr)

    @verifies("VLLM-8")
    def test_a_vllm_that_did_not_load_the_plugin_stops_when_pfx_vllm_asks_for_it(self):
        model = vllm_lane.tiny_model()
        for value in ("1", ""):  # empty means on, as for every pfx switch: the guard's .pth line must see it
            with self.subTest(PFX_VLLM=value):
                ran = start_in_a_process(model, PFX_VLLM=value, VLLM_PLUGINS="other")
                self.assertNotEqual(ran.returncode, 0, ran.stdout[-5000:])
                self.assertNotIn(STARTED, ran.stdout)
                self.assertNotIn(LOADED, ran.stdout + ran.stderr)
                self.assertIn(f'PFX_VLLM={value} asks for pfx\'s rule in charge of vLLM\'s prefix cache, but '
                              f'VLLM_PLUGINS="other" does not name pfx\'s plugin "pfx": vLLM would serve without it',
                              ran.stderr)

    @verifies("VLLM-1 VLLM-7 INV-2")
    def test_a_streaming_session_caches_no_row_decode_wrote(self):
        from vllm.engine.arg_utils import AsyncEngineArgs
        from vllm.engine.protocol import StreamingInput
        from vllm.inputs import TokensPrompt
        from vllm.sampling_params import RequestOutputKind
        from vllm.v1.engine.async_llm import AsyncLLM

        first = tuple((5 * i + 1) % 512 for i in range(150))
        second = tuple((7 * i + 2) % 512 for i in range(40))
        generated = 24

        async def session(engine):
            async def inputs():
                for chunk in (first, second):
                    yield StreamingInput(prompt=TokensPrompt(prompt_token_ids=list(chunk)))
            params = vllm.SamplingParams(max_tokens=generated, temperature=0.0, ignore_eos=True, detokenize=False,
                                         output_kind=RequestOutputKind.DELTA)
            tokens = []  # the first chunk's output, then the second's
            async for out in engine.generate(inputs(), params, request_id="session"):
                tokens += out.outputs[0].token_ids
            return tokens

        async def extend(engine, prompt):
            params = vllm.SamplingParams(max_tokens=4, temperature=0.0, ignore_eos=True, detokenize=False)
            async for out in engine.generate(TokensPrompt(prompt_token_ids=list(prompt)), params, request_id="after"):
                last = out
            return last.num_cached_tokens

        async def session_then_extension(engine):  # one event loop: AsyncLLM's output handler lives in it
            tokens = await session(engine)
            # The session's prompt grew by the first chunk's output but its last token (rows decode
            # wrote) and then the second chunk: a request that holds all of it may take the first
            # prompt's rows and no more.
            self.assertEqual(len(tokens), 2 * generated)
            prompt = first + tuple(tokens[:generated - 1]) + second + tuple(tokens[generated:-1]) + (9, 9, 9)
            return prompt, await extend(engine, prompt)

        arguments = dict(model=vllm_lane.tiny_model(), skip_tokenizer_init=True, dtype="float32",
                         enable_prefix_caching=True, block_size=vllm_lane.BLOCK,
                         max_num_batched_tokens=vllm_lane.MAX_NUM_BATCHED_TOKENS, max_model_len=4096,
                         kv_cache_memory_bytes=256 << 20, seed=0, enforce_eager=True)
        engine = AsyncLLM.from_engine_args(AsyncEngineArgs(**arguments))
        try:
            prompt, cached = asyncio.run(session_then_extension(engine))
        finally:
            engine.shutdown()
        expected = vllm_lane.pfx_offset(len(first) // vllm_lane.BLOCK * vllm_lane.BLOCK, len(prompt), CHUNK, KEEP_MIN)
        self.assertGreater(expected, 0)
        self.assertEqual(cached, expected)


@unittest.skipIf(WHY_NOT, WHY_NOT)
class Settings(unittest.TestCase):
    """The knobs, read without starting vLLM."""

    @verifies("VLLM-3")
    def test_the_plugin_is_off_unless_pfx_vllm_says_on(self):
        for value in (None, "0", "off", "no", "false", " OFF\n"):
            environ = {} if value is None else {"PFX_VLLM": value}
            self.assertIsNone(plugin.settings_from_environment(environ), value)
        for value in ("1", "", "yes", "True"):  # empty is on, as for every pfx switch
            self.assertEqual(plugin.settings_from_environment({"PFX_VLLM": value}), plugin.Settings(None, 0), value)
        self.assertEqual(plugin.settings_from_environment(
            {"PFX_VLLM": "on", "PFX_VLLM_CHUNK": "64", "PFX_VLLM_KEEP_MIN": "1_000"}), plugin.Settings(64, 1000))
        for value, invariant in ((None, True), ("", True), ("on", True), ("0", False), ("off", False)):
            environ = {"PFX_VLLM": "1"} if value is None else {"PFX_VLLM": "1", "PFX_VLLM_BATCH_INVARIANT": value}
            self.assertEqual(plugin.settings_from_environment(environ).batch_invariant, invariant, value)

    @verifies("VLLM-9")
    def test_the_start_message_says_what_the_guarantee_covers(self):
        from pfx.integrations.vllm.premises import Premises
        invariant = plugin._guarantee(Premises(True, False, "pfx's batch-invariant kernels (...)"))
        self.assertIn("independently of its batch (pfx's batch-invariant kernels (...);", invariant)
        self.assertIn("whatever is batched beside it", invariant)
        kernels = plugin._guarantee(Premises(False, True, "vLLM's own kernels in float32"))
        self.assertIn("a request served alone resumes bit for bit as its cold run (vLLM's own kernels", kernels)
        self.assertIn("vllm.conform measures it", kernels)
        # The step in the core's report's words, from the binding: never the number 2^64 - 1.
        self.assertEqual(plugin._describe_step(256), "prefill step 256 tokens")
        self.assertEqual(plugin._describe_step(plugin.ONE_STEP), "prefill step one step, whatever the length")
        self.assertNotIn(str(plugin.ONE_STEP), plugin._describe_step(plugin.ONE_STEP))

    @verifies("VLLM-3")
    def test_malformed_knobs_raise_config_errors_naming_the_variable(self):
        for variable, value in (("PFX_VLLM_CHUNK", "0"), ("PFX_VLLM_CHUNK", "2**5"), ("PFX_VLLM_CHUNK", ""),
                                ("PFX_VLLM_KEEP_MIN", "-1"), ("PFX_VLLM_KEEP_MIN", "18446744073709551616"),
                                ("PFX_VLLM", "2"), ("PFX_VLLM_BATCH_INVARIANT", "2")):
            environ = {"PFX_VLLM": "1", variable: value}
            with self.subTest(variable=variable, value=value), self.assertRaises(pfx.ConfigError) as raised:
                plugin.settings_from_environment(environ)
            self.assertTrue(str(raised.exception).startswith(f'{variable}="{value}"'), str(raised.exception))

    @verifies("VLLM-3")
    def test_enable_names_a_bad_argument(self):
        for arguments in ({"chunk": 0}, {"chunk": -32}, {"chunk": 32.0}, {"chunk": True}, {"keep_min": -1},
                          {"keep_min": "64"}, {"batch_invariant": 1}, {"batch_invariant": "off"}):
            with self.subTest(**arguments), self.assertRaises(ValueError) as raised:
                plugin.enable(**arguments)
            self.assertIn(next(iter(arguments)), str(raised.exception))
        self.assertNotIn("PFX_VLLM", os.environ)

    @verifies("VLLM-5")
    def test_a_kv_cache_group_pfx_cannot_cut_exactly_is_refused_naming_its_layers(self):
        import types

        import torch
        from vllm.v1.kv_cache_interface import (FullAttentionSpec, KVCacheGroupSpec, MambaSpec, SinkFullAttentionSpec,
                                                SlidingWindowSpec)
        attention = dict(block_size=32, num_kv_heads=2, head_size=32, dtype=torch.float32)

        def groups(*specs):
            return types.SimpleNamespace(kv_cache_groups=[
                KVCacheGroupSpec(layer_names=[f"model.layers.{i}.{j}" for j in range(i + 1)], kv_cache_spec=spec)
                for i, spec in enumerate(specs)])

        full, sliding = FullAttentionSpec(**attention), SlidingWindowSpec(**attention, sliding_window=64)
        self.assertEqual(plugin.group_refusals(groups(full, sliding)), [])
        mamba = MambaSpec(block_size=32, shapes=((4, 8),), dtypes=(torch.float32,))
        refused = plugin.group_refusals(groups(full, mamba))
        self.assertEqual(len(refused), 1)
        self.assertIn("layers model.layers.1.0, model.layers.1.1 keep a KV cache of kind MambaSpec", refused[0])
        sink = SinkFullAttentionSpec(**attention, sink_len=4) if "sink_len" in SinkFullAttentionSpec.__dataclass_fields__ \
            else None
        if sink is not None:  # a kind the plugin was not shown exact on, though it is full attention's subclass
            self.assertIn("SinkFullAttentionSpec", plugin.group_refusals(groups(sink))[0])

    @verifies("VLLM-5 VLLM-6 VLLM-7 VLLM-8 VLLM-10")
    def test_a_model_with_state_space_layers_or_an_option_pfx_cannot_vouch_for_is_refused_before_it_loads(self):
        import tempfile

        import transformers
        from vllm.engine.arg_utils import EngineArgs
        folder = tempfile.mkdtemp(prefix="pfx-vllm-jamba-")
        config = transformers.JambaConfig(vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                          num_attention_heads=2, num_key_value_heads=2, attn_layer_period=2,
                                          attn_layer_offset=1, expert_layer_period=100, num_experts=1, mamba_d_state=8)
        config.architectures = ["JambaForCausalLM"]
        config.save_pretrained(folder)  # the configuration alone: vLLM refuses it before it would read weights
        plugin.enable()
        try:
            for model, options, expected in (
                    (folder, {}, "layers 0 (mamba) keep a Mamba, linear-attention or other state-space state"),
                    (vllm_lane.tiny_model(), {"speculative_config": {"method": "eagle", "num_speculative_tokens": 2,
                                                                     "model": vllm_lane.tiny_model(seed=1)}},
                     "speculative decoding by the method 'eagle': pfx serves 'ngram' and 'draft_model'"),
                    (vllm_lane.tiny_model(), {"kv_transfer_config": {"kv_connector": "ExampleConnector",
                                                                     "kv_role": "kv_both"}},
                     "a KV connector (ExampleConnector) is configured")):
                with self.subTest(expected=expected), self.assertRaises(plugin.Refused) as raised:
                    EngineArgs(enforce_eager=True, model=model, skip_tokenizer_init=True, enable_prefix_caching=True, block_size=32,
                               **options).create_engine_config()
                self.assertIn(expected, str(raised.exception))
            # n-gram drafts are served: the step model knows the padded admission of k = 3 drafts.
            config = EngineArgs(enforce_eager=True, model=vllm_lane.tiny_model(), skip_tokenizer_init=True, enable_prefix_caching=True,
                                block_size=32, max_num_batched_tokens=256, dtype="float32",
                                speculative_config={"method": "ngram", "num_speculative_tokens": 3,
                                                    "prompt_lookup_max": 2}).create_engine_config()
            self.assertEqual(plugin.admission_padding(config), 3)
            self.assertEqual(plugin.prefill_step(config), 0)  # batch invariant: no step premise
            kernels = plugin.Settings(batch_invariant=False)  # vLLM's kernels: n-gram drafts reserve no slot
            self.assertEqual(plugin.prefill_step(config, plugin.premises_of(config, kernels)), 256)
        finally:
            plugin.disable()

    @verifies("VLLM-6")
    def test_bfloat16_on_vllms_own_kernels_is_refused_before_it_loads_unless_certified(self):
        from vllm.engine.arg_utils import EngineArgs
        model = vllm_lane.tiny_model("bfloat16")
        plugin.enable(batch_invariant=False)
        try:
            for dtype in ("bfloat16", "float16"):
                with self.subTest(dtype=dtype), self.assertRaises(plugin.Refused) as raised:
                    EngineArgs(enforce_eager=True, model=model, skip_tokenizer_init=True, enable_prefix_caching=True, block_size=32,
                               dtype=dtype).create_engine_config()
                self.assertIn(f"with vLLM's own kernels (PFX_VLLM_BATCH_INVARIANT=0) a row's bits in {dtype} depend "
                              f"on how many rows its step computes", str(raised.exception))
                self.assertIn(f"--dtype {dtype} --block-size 32 --vllm-kernels --certify FILE", str(raised.exception))
            # float32 on vLLM's kernels keeps the step premise: without chunked prefill, the whole prompt.
            config = EngineArgs(enforce_eager=True, model=vllm_lane.tiny_model(), skip_tokenizer_init=True, enable_prefix_caching=True,
                                block_size=32, dtype="float32", enable_chunked_prefill=False).create_engine_config()
            self.assertEqual(plugin.prefill_step(config), plugin.ONE_STEP)
        finally:
            plugin.disable()

    @verifies("VLLM-8")
    def test_a_refused_configuration_raises_pfx_refused_itself_never_pydantics_error(self):
        # One refusal type: the plugin's is pfx.Refused, a ValueError, which pydantic would wrap in its
        # ValidationError inside VllmConfig's check. A user catches it by either base, or by the plugin's name.
        import pydantic
        from vllm.engine.arg_utils import EngineArgs
        self.assertIs(plugin.Refused, pfx.Refused)
        model = vllm_lane.tiny_model()
        expected = ("pfx's vLLM plugin refuses this configuration: PFX_VLLM_CHUNK=48 is not a multiple of vLLM's "
                    "block size 32")

        def check(raised):
            error = raised.exception
            self.assertIs(type(error), pfx.Refused)  # not pydantic's ValidationError, nor what carried it there
            self.assertNotIsInstance(error, pydantic.ValidationError)
            self.assertIsInstance(error, ValueError)
            self.assertIsInstance(error, RuntimeError)
            self.assertEqual(error.refusal, "configuration")
            self.assertEqual(error.refusal, plugin.REFUSAL)
            self.assertTrue(str(error).startswith(expected), str(error))

        plugin.enable()
        try:
            config = EngineArgs(enforce_eager=True, model=model, skip_tokenizer_init=True, enable_prefix_caching=True,
                                block_size=32).create_engine_config()
            plugin.enable(chunk=48)
            # The configuration's check, where vLLM's front end makes it, by EngineArgs or by vllm.LLM.
            with self.assertRaises(pfx.Refused) as raised:
                EngineArgs(enforce_eager=True, model=model, skip_tokenizer_init=True, enable_prefix_caching=True,
                           block_size=32).create_engine_config()
            check(raised)
            self.assertIsNone(raised.exception.__cause__)
            with self.assertRaises(pfx.Refused) as raised:
                vllm_lane.start(model)
            check(raised)
            # A copy (dataclasses.replace makes it through the constructor), and the check vLLM's engine core
            # runs again on the configuration it was sent, which no constructor wraps.
            import dataclasses
            with self.assertRaises(pfx.Refused) as raised:
                dataclasses.replace(config)
            check(raised)
            with self.assertRaises(pfx.Refused) as raised:
                config.__post_init__()
            check(raised)
        finally:
            plugin.disable()

    @verifies("VLLM-9")
    def test_fixed_rows_give_a_row_the_same_bits_whatever_the_rows_beside_it(self):
        import random

        import torch

        from pfx.integrations.vllm import linear

        def kernel(x, weight, bias):  # a stand-in whose result depends on the call's row count, as oneDNN's does
            return x @ weight.t() + x.shape[0] * 1e-3

        # Small whole numbers: every sum is exact in any order, so only the row count moves a result.
        weight = torch.randint(-8, 8, (8, 5)).float()
        invariant = linear.fixed_rows(kernel, rows=4)
        draw = random.Random(SEED)
        rows = torch.randint(-8, 8, (40, 5)).float()
        alone = torch.cat([invariant(rows[i:i + 1], weight, None) for i in range(40)])
        for _ in range(50):
            start, count = draw.randrange(40), draw.randrange(1, 41)
            count = min(count, 40 - start)
            got = invariant(rows[start:start + count], weight, None)
            self.assertTrue(torch.equal(got, alone[start:start + count]), (start, count))
        self.assertEqual(tuple(invariant(rows[:6].reshape(2, 3, 5), weight, None).shape), (2, 3, 8))
        self.assertEqual(tuple(invariant(rows[:0], weight, None).shape), (0, 8))
        # vLLM's layers get it: the plugin's batch invariance wraps the kernel vLLM's dispatch picks.
        plugin.enable()
        try:
            self.assertTrue(linear.installed())
            from vllm.model_executor.layers import utils
            layer = torch.nn.Linear(5, 8)
            utils.dispatch_cpu_unquantized_gemm(layer, remove_weight=False)
            self.assertEqual(layer.cpu_linear.pfx_rows, linear.ROWS)
        finally:
            plugin.disable()
        self.assertFalse(linear.installed())

    @verifies("VLLM-5 VLLM-2")
    def test_a_hit_found_again_shorter_is_decided_again_until_lookup_and_rule_agree(self):
        import types

        # A sliding window's hits, as vLLM's coordinator finds them: at 256 its window lacks a block, so
        # the hit at that limit is 224, off the rule's 64-token grid; at 192 it is whole. Three lookups.
        hits = {299: 288, 256: 224, 192: 192}
        lookups = []

        def find_longest_cache_hit(block_hashes, limit):
            lookups.append(limit)
            return ("blocks", hits[limit], 0)

        manager = types.SimpleNamespace(
            pfx_config=pfx.Config(enabled=True, keep_min=0, chunk=64), prefix_cache_lookup_enabled=lambda r: True,
            coordinator=types.SimpleNamespace(find_longest_cache_hit=find_longest_cache_hit),
            enable_kv_cache_events=False, create_kv_cache_blocks=lambda computed: computed)
        request = types.SimpleNamespace(all_token_ids=list(range(300)), num_tokens=300, block_hashes=[],
                                        request_id="looked-up-twice")
        self.assertEqual(plugin._get_computed_blocks(manager, request), ("blocks", 192, 0))
        self.assertEqual(lookups, [299, 256, 192])

    @verifies("VLLM-3")
    def test_an_untested_vllm_version_is_refused_before_anything_is_patched(self):
        with mock.patch.object(vllm, "__version__", "0.31.9"), mock.patch.dict(plugin._originals, {}, clear=True):
            with self.assertRaises(pfx.Refused) as raised:
                plugin._install(plugin.Settings())
            self.assertEqual(plugin._originals, {})
        self.assertIn("tested with vLLM 0.32.0, and this is vLLM 0.31.9", str(raised.exception))
        self.assertEqual(raised.exception.refusal, "untested version")
        self.assertIsInstance(raised.exception, RuntimeError)  # as before pfx.Refused was its type


if __name__ == "__main__":
    unittest.main()
