"""vLLM's own prefix-caching suite under pfx's rule, and a prompt holding multimodal placeholder ids.

``tests/v1/core/test_prefix_caching.py`` of vLLM 0.32.0's source distribution (scripts/vllm.sh fetches
it into its environment; --print-upstream-tests says where) runs with pytest, with pfx's vLLM plugin
installed and its rule configured on every KV cache manager the tests make (upstream_rule.py). Every
test passes except the ones listed in BY_DESIGN, each failing where pfx's rule decides otherwise than
stock vLLM, with the assertion its reason names. The suite fails on any other failure, on a listed test
that passes (the list must stay true), on a skipped test, and on a count of tests other than the known
one (so that a run that collected nothing or lost tests cannot pass).

The rule must never raise inside vLLM's engine core for a prompt vLLM accepts: a multimodal prompt holds
-1 in its placeholder positions, and the plugin's lookup decides on it like any other prompt.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
import unittest
import xml.etree.ElementTree as ElementTree

from support import verifies

import vllm_lane

HERE = os.path.dirname(os.path.abspath(__file__))
WHY_NOT = vllm_lane.WHY_NOT
if not WHY_NOT:
    import torch
    from vllm.multimodal.inputs import MultiModalFeatureSpec, MultiModalKwargsItem, PlaceholderRange
    from vllm.sampling_params import SamplingParams
    from vllm.utils.hashing import sha256
    from vllm.v1.core.kv_cache_manager import KVCacheManager
    from vllm.v1.core.kv_cache_utils import get_request_block_hasher, init_none_hash
    from vllm.v1.kv_cache_interface import FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec
    from vllm.v1.request import Request

    import pfx
    import pfx.integrations.vllm as plugin

UPSTREAM_FILE = "tests/v1/core/test_prefix_caching.py"
COLLECTED = 173  # the tests vLLM 0.32.0's file holds, parametrizations counted

# Not run here: they need what the machine that runs the suites does not have, with or without pfx.
NOT_RUN = {
    "test_nixl_hisparse_full_block_import_keeps_a_writable_tail":
        "builds a vLLM configuration of the model facebook/opt-125m, whose config.json is on Hugging Face's "
        "hub, which the suites do not reach (8 parametrizations)",
}
NOT_RUN_COUNT = 8

# Where pfx's rule decides otherwise than stock vLLM, each with the assertion its failure must show.
BY_DESIGN = {
    "test_decode": (
        "None is not None",
        "expects the block that decode filled to be cached (its hash set); pfx never caches a row decode "
        "wrote: a request's blocks are cached up to its prompt's end (INV-2, canonical_end)"),
}
# And, with vLLM's own kernels (PFX_VLLM_BATCH_INVARIANT=0: the ctest vllm.upstream_vllm_kernels), where
# the prefill-step bound (INV-12) applies: judged with a manager made alone prefilling a whole prompt in
# one step (upstream_rule.py), a resume that would leave a last step of one token, where the cold run's
# one step is longer, takes a chunk less.
BY_THE_STEP_BOUND = {
    "test_hisparse_terminal_prefix_waits_for_all_workers_and_preserves_identity": (
        "assert 16 == (2 * 16)",
        "expects a 33-token prompt to take the 32 tokens cached for it (block 16); its resume would compute "
        "its last token alone, a step of one token its cold run does not take, so the prefill-step bound "
        "(INV-12) takes 16"),
    "test_session_id_does_not_affect_prefix_cache_identity": (
        "assert 4 == (4 * 2)",
        "expects a 9-token prompt to take the 8 tokens cached for it (block 4); its resume would compute its "
        "last token alone, a step of one token its cold run does not take, so the prefill-step bound (INV-12) "
        "takes 4"),
    "test_different_block_size": (
        "assert 2 == 3",
        "expects a 97-token prompt to take the 96 tokens cached for it (3 blocks of 32, the groups' common "
        "block); its resume would compute its last token alone, a step of one token its cold run does not "
        "take, so the prefill-step bound (INV-12) takes 64"),
}


def upstream_folder() -> str:
    """Where scripts/vllm.sh put vLLM's tests: PFX_VLLM_UPSTREAM_TESTS (the suite's ctest sets it), else
    what the script says."""
    folder = os.environ.get("PFX_VLLM_UPSTREAM_TESTS")
    if folder:
        return folder
    script = os.path.join(HERE, os.pardir, os.pardir, os.pardir, "scripts", "vllm.sh")
    return subprocess.run([script, "--print-upstream-tests"], check=True, capture_output=True,
                          text=True).stdout.strip()


def outcomes(report: str) -> dict:
    """Each test case of a pytest JUnit XML report: name -> ("passed" | "failed" | "skipped", message)."""
    found = {}
    for case in ElementTree.parse(report).getroot().iter("testcase"):
        kind, message = "passed", ""
        for child in case:
            if child.tag in ("failure", "error"):
                kind, message = "failed", (child.get("message") or "") + "\n" + (child.text or "")
            elif child.tag == "skipped":
                kind, message = "skipped", child.get("message") or ""
        found[case.get("name")] = (kind, message)
    return found


def by_design() -> dict:
    """The differences by design of this run: the step bound's too where the plugin passes a step; none of
    decode's where a certificate proves rows decode wrote exact (PFX_VLLM_UPSTREAM_DECODE_ROWS_EXACT, the
    ctest vllm.upstream_decode_rows_exact: the rule's Config.decode_rows_exact, as such a certificate gives
    it), for then vLLM's test_decode passes."""
    kernels = os.environ.get("PFX_VLLM_BATCH_INVARIANT", "").strip().lower() in ("0", "false", "off", "no")
    differing = dict(BY_DESIGN, **BY_THE_STEP_BOUND) if kernels else dict(BY_DESIGN)
    if os.environ.get("PFX_VLLM_UPSTREAM_DECODE_ROWS_EXACT"):
        differing.pop("test_decode")
    return differing


def judge(found: dict, differing: dict) -> list:
    """What is wrong with the upstream suite's outcomes, each said; empty when they are the known ones, with
    `differing` the differences by design (by_design())."""
    problems = []
    expected_count = COLLECTED - NOT_RUN_COUNT
    if len(found) != expected_count:
        problems.append(f"{len(found)} tests ran, expected {expected_count} ({COLLECTED} collected, "
                        f"{NOT_RUN_COUNT} not run here)")
    for name, (kind, message) in sorted(found.items()):
        base = name.split("[")[0]
        if base in NOT_RUN:
            problems.append(f"{name} ran, though it is deselected: {NOT_RUN[base]}")
        elif base in differing:
            assertion, reason = differing[base]
            if kind == "passed":
                problems.append(f"{name} passes, though it is listed as differing by design ({reason}): "
                                f"update BY_DESIGN or BY_THE_STEP_BOUND")
            elif kind == "skipped":
                problems.append(f"{name} was skipped ({message}), so its difference by design was not seen")
            elif assertion not in message:
                problems.append(f"{name} fails otherwise than by design (expected the assertion "
                                f"'{assertion}': {reason}):\n{message}")
        elif kind != "passed":
            problems.append(f"{name} {kind}:\n{message}")
    missing = sorted(set(differing) - {name.split("[")[0] for name in found})
    if missing:
        problems.append(f"listed as differing by design but not run: {', '.join(missing)}")
    return problems


@unittest.skipIf(WHY_NOT, WHY_NOT)
class UpstreamPrefixCaching(unittest.TestCase):

    @verifies("VLLM-1 VLLM-2 VLLM-6 INV-2 INV-12")
    def test_vllms_own_prefix_caching_suite_passes_but_for_the_differences_by_design(self):
        folder = upstream_folder()
        if not os.path.isfile(os.path.join(folder, UPSTREAM_FILE)):
            self.skipTest(f"vLLM's own tests are not in {folder}: scripts/vllm.sh fetches them (its log: "
                          f"{os.path.dirname(folder)}/upstream-tests.log)")
        # upstream_rule.py from here, and pfx as this process finds it. HF_HUB_OFFLINE: a test that would read a
        # model's configuration from Hugging Face's hub fails at once rather than waiting on the network.
        path = [HERE] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
        environment = dict(os.environ, PYTHONPATH=os.pathsep.join(path), HF_HUB_OFFLINE="1", PYTHONDONTWRITEBYTECODE="1")
        environment.pop("PFX_VLLM", None)  # upstream_rule.py turns the rule on, for the managers made alone too
        for variable in plugin._set_by_pfx:  # vLLM's kernels as the suite's settings say, not as this process's plugin set them
            environment.pop(variable, None)
        with tempfile.TemporaryDirectory() as scratch:
            report = os.path.join(scratch, "upstream.xml")
            command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "upstream_rule",
                       f"--junitxml={report}", UPSTREAM_FILE]
            for name in NOT_RUN:
                command += ["--deselect", f"{UPSTREAM_FILE}::{name}"]
            started = time.monotonic()
            run = subprocess.run(command, cwd=folder, env=environment, capture_output=True, text=True, timeout=600)
            lines = run.stdout.strip().splitlines()
            configured = re.search(r"pfx's rule configured (\d+) KV cache managers.*", run.stdout)
            print(f"vLLM's {UPSTREAM_FILE} under pfx's rule: {time.monotonic() - started:.1f} s, pytest exit "
                  f"status {run.returncode}: {lines[-1] if lines else 'no output'}")
            self.assertTrue(os.path.isfile(report), f"pytest wrote no report:\n{run.stdout[-4000:]}\n{run.stderr[-4000:]}")
            self.assertTrue(configured and int(configured.group(1)) > 0,
                            f"pytest did not load upstream_rule.py, or the rule configured no manager:\n{run.stdout[-4000:]}")
            print(configured.group(0))
            found = outcomes(report)
        differing = by_design()
        problems = judge(found, differing)
        if problems:
            self.fail(f"vLLM's {UPSTREAM_FILE} under pfx's rule:\n\n" + "\n\n".join(problems))
        for name in sorted(differing):
            print(f"  differs by design: {name}: {differing[name][1]}")

    @verifies("VLLM-2")
    def test_the_judgement_fails_on_an_unexpected_failure_a_listed_pass_and_a_wrong_count(self):
        for differing in (BY_DESIGN, dict(BY_DESIGN, **BY_THE_STEP_BOUND)):
            passing = {f"test_{i}": ("passed", "") for i in range(COLLECTED - NOT_RUN_COUNT - len(differing))}
            known = dict(passing, **{name: ("failed", f"{assertion}\n...") for name, (assertion, _) in differing.items()})
            self.assertEqual(judge(known, differing), [])
            unexpected = dict(known, test_0=("failed", "ValueError: prompt[10]: expected a token id"))
            self.assertTrue(any("test_0 failed" in p for p in judge(unexpected, differing)))
            listed = dict(known, test_decode=("passed", ""))
            self.assertTrue(any("test_decode passes" in p for p in judge(listed, differing)))
            otherwise = dict(known, test_decode=("failed", "ValueError: prompt[10]: expected a token id"))
            self.assertTrue(any("otherwise than by design" in p for p in judge(otherwise, differing)))
            fewer = dict(known)
            del fewer["test_0"]
            self.assertTrue(any("tests ran, expected" in p for p in judge(fewer, differing)))
            self.assertTrue(any("tests ran, expected" in p for p in judge({}, differing)))
            skipped = dict(known, test_0=("skipped", "no reason"))
            self.assertTrue(any("test_0 skipped" in p for p in judge(skipped, differing)))


BLOCK = 16


@unittest.skipIf(WHY_NOT, WHY_NOT)
class Placeholders(unittest.TestCase):
    """A multimodal prompt, whose placeholder positions vLLM fills with -1, through the plugin's lookup."""

    @classmethod
    def setUpClass(cls):
        plugin._install(plugin.Settings())
        init_none_hash(sha256)

    def manager(self):
        spec = FullAttentionSpec(block_size=BLOCK, num_kv_heads=1, head_size=1, dtype=torch.float32)
        config = KVCacheConfig(num_blocks=32, kv_cache_tensors=[], kv_cache_groups=[KVCacheGroupSpec(["layer"], spec)])
        manager = KVCacheManager(config, max_model_len=8192, scheduler_block_size=BLOCK, hash_block_size=BLOCK,
                                 enable_caching=True)
        # As the plugin's scheduler hook configures it, for a scheduler prefilling a prompt in one step.
        manager.pfx_config = pfx.Config(enabled=True, keep_min=0, chunk=BLOCK, prefill_step=plugin.ONE_STEP)
        manager.coordinator.pfx_config = manager.pfx_config
        return manager

    @staticmethod
    def request(name, tokens, images):
        features = [MultiModalFeatureSpec(data=MultiModalKwargsItem.dummy(), mm_position=PlaceholderRange(offset=o, length=n),
                                          identifier=f"image-{o}", modality="image") for o, n in images]
        params = SamplingParams(max_tokens=4)
        params.update_from_generation_config({}, eos_token_id=100)
        return Request(request_id=name, prompt_token_ids=list(tokens), mm_features=features, sampling_params=params,
                       pooling_params=None, block_hasher=get_request_block_hasher(BLOCK, sha256))

    @verifies("VLLM-2")
    def test_a_prompt_holding_placeholder_ids_takes_the_hit_the_rule_allows_without_an_exception(self):
        images = [(10, 22), (40, 6)]  # placeholders across the first three blocks' bounds
        tokens = list(range(10)) + [-1] * 22 + list(range(10, 18)) + [-1] * 6 + list(range(18, 25))  # 53 tokens
        manager = self.manager()
        first = self.request("first", tokens, images)
        computed, hit, _ = manager.get_computed_blocks(first)
        self.assertEqual(hit, 0)
        self.assertIsNotNone(manager.allocate_slots(first, len(tokens), hit, computed))  # caches 3 full blocks
        before = plugin.decisions()
        # The same prompt: vLLM holds its 48 tokens of whole blocks, 5 are left, and the rule takes 48.
        _, again, _ = manager.get_computed_blocks(self.request("again", tokens, images))
        self.assertEqual(again, 48)
        # Its first 49 tokens: one token would be left, a step of one its cold run does not take, so the rule
        # takes a block less, found again by vLLM's lookup: the decision runs twice on placeholder ids.
        _, shorter, _ = manager.get_computed_blocks(self.request("shorter", tokens[:49], images))
        self.assertEqual(shorter, 32)
        after = plugin.decisions()
        self.assertEqual(after["reused"] - before["reused"], 2)
        self.assertEqual(after["looked_up_again"] - before["looked_up_again"], 1)
        self.assertEqual(after["tokens_held"] - before["tokens_held"], 96)
        self.assertEqual(after["tokens_reused"] - before["tokens_reused"], 80)


if __name__ == "__main__":
    unittest.main()
