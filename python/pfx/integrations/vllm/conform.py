"""pfx's conformance check of vLLM, through vLLM's own prefix cache (docs/engines.md, "vLLM").

vLLM cannot be driven chunk by chunk as ``pfx conform`` drives an engine, so this check resumes a
prompt the way vLLM itself does: it warms the prefix cache with the prompt's first k tokens and a
short tail that does not continue it, serves the prompt (vLLM takes the k cached tokens:
``num_cached_tokens`` must be k, else the check stops with an error), and compares the greedy output,
every generated token and its logprob, bit for bit with a cold run (the cache reset first). Offsets k
are the multiples of each candidate grid: the block size, its doublings up to the budget's max grid,
and the rule chunk; prompt lengths, offsets and repeated cold runs are conform's own (docs/conform.md).
It resumes a prompt only at the offsets pfx's plugin may take: it asks pfx's core (``pfx.decide``, with
the plugin's ``Config``: the grid as chunk, vLLM's prefill step as ``prefill_step``) whether the rule
would resume there, and counts the offsets it skips and why (vLLM computes a prefill step of one token
otherwise than a longer one, so the plugin never resumes where the resumed prefill's last step is one
token and the cold run's is not, or the other way round). Two findings leave the verdict as it is:
"decode rows", resumes past a prompt's end, from rows that decode wrote (pfx's rule never takes them);
and "batching", each prompt served alone against the same prompt served in one batch with others,
both cold (pfx's guarantee is for a request served alone: where they differ, batching alone changes
vLLM's answers). The verdict, its text and JSON, and the exit status are ``pfx conform``'s, from the
same C++ code (pfx::conform::decide, to_text, to_json).

    python -m pfx.integrations.vllm.conform MODEL [--dtype D] [--block-size N] [--max-num-batched-tokens N]
        [--max-num-scheduled-tokens N] [--long-prefill-token-threshold N] [--no-chunked-prefill]
        [--budget quick|default|thorough] [--seed N] [--rule-chunk N] [--max-model-len N] [--vllm-kernels] [--json]
        [--certify FILE]

The check starts its own vLLM engine, in this process (the command sets
VLLM_ENABLE_V1_MULTIPROCESSING=0 unless it is set: the decode rows' K and V bytes are read from vLLM's
cache), with pfx's plugin off: it checks stock vLLM's cache, rows decode wrote included, and refuses
to run with PFX_VLLM set. vLLM computes as the plugin makes it compute, batch invariantly
(``pfx.integrations.vllm.batch_invariance()``: on the CPU build its attention's KV split off), so that the batching finding and the resumes that end with a one-token
prefill step are judged as the plugin serves them; ``--vllm-kernels`` keeps vLLM's own kernels, as
``PFX_VLLM_BATCH_INVARIANT=0`` does for the plugin, and then the check resumes only where the rule
with vLLM's prefill step would. Exit status: 0 safe, 1
unsafe, 4 nondeterministic, 5 no exact grid, 6 degenerate (as ``pfx conform``), 2 bad input, 3 the
check could not run as it says (vLLM did not resume where it was led to).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys
import tempfile
import time
from typing import Callable, Optional

from ... import _native
from ..._arguments import whole
from .. import vllm as plugin
from . import attention, linear, premises as _premises, rule as _rule
from ._check import BadInput, CheckError, Engine, Served, chosen_logprobs, first_difference, same_bits, start as _start

__all__ = ["BadInput", "CheckError", "Engine", "PluginOn", "Served", "check", "chosen_logprobs", "conform",
           "describe", "first_difference", "main", "start"]

GENERATED = 4
"""Tokens generated for each served prompt: the first one's logprob reads the prompt's last row, the
next ones every row again, through decode."""

# vLLM's rows cannot be read from outside its cache: "rows written" is not among them.
PREMISES_CHECKED = ("finite logits", "logits depend on tokens")
PREMISE_SEED_MASK = 0x9E3779B97F4A7C15  # the premises' prompts are drawn apart from the check's own


class PluginOn(RuntimeError):
    """pfx's plugin is on in this process: the check would not see stock vLLM's cache."""


def refuse_plugin() -> None:
    """Raises PluginOn when pfx's plugin is on in this process: the check must see stock vLLM."""
    if plugin.settings_from_environment() is not None or plugin.settings() is not None:
        raise PluginOn(f"pfx.integrations.vllm.conform checks stock vLLM's prefix cache, rows decode wrote "
                       f"included, and pfx's plugin is on ({plugin.ENABLE_VARIABLE} is set, or enable() was "
                       f"called): unset {plugin.ENABLE_VARIABLE} and run the check in a process of its own")


def start(model: str, *, dtype: str = "float32", block_size: int = 32, max_num_batched_tokens: Optional[int] = None,
          enable_chunked_prefill: bool = True, batch_invariant: bool = True, **engine_args):
    """The vllm.LLM the check runs: prefix caching on, no tokenizer (token-id prompts), and the
    configuration asked for; `engine_args` go to vllm.LLM as they are. With `batch_invariant`, vLLM
    computes as pfx's plugin makes it (batch_invariance()); a variable of vLLM's that asks otherwise is
    a BadInput naming it."""
    refuse_plugin()
    if batch_invariant:
        reasons = plugin.batch_invariance_refusals(plugin.Settings())
        if reasons:
            raise BadInput(reasons[0].replace(f"set {plugin.BATCH_INVARIANT_VARIABLE}=0", "give --vllm-kernels"))
        plugin.apply_batch_invariance()
    else:
        linear.uninstall()  # vLLM's own kernels, also after an engine of this process had pfx's
        attention.uninstall()
    # Eager: vLLM's torch.compile traces pfx's batch-invariant linear layers with a row count made
    # constant, and fails; the suites and the plugin's documented servers run eagerly too.
    arguments = dict(skip_tokenizer_init=True, dtype=dtype, block_size=block_size,
                     enable_chunked_prefill=enable_chunked_prefill, enforce_eager=True)
    if max_num_batched_tokens is not None:
        arguments["max_num_batched_tokens"] = max_num_batched_tokens
    arguments.update(engine_args)
    return _start(model, **arguments)


def describe(llm, model: str) -> str:
    """The engine's name in the report: vLLM's version and the configuration that decides its results."""
    import vllm
    config = llm.llm_engine.vllm_config
    dtype = str(config.model_config.dtype).removeprefix("torch.")
    scheduler = config.scheduler_config
    options = [f"block {config.cache_config.block_size}", f"max_num_batched_tokens {scheduler.max_num_batched_tokens}"]
    if scheduler.max_num_scheduled_tokens is not None:
        options.append(f"max_num_scheduled_tokens {scheduler.max_num_scheduled_tokens}")
    if scheduler.long_prefill_token_threshold:
        options.append(f"long_prefill_token_threshold {scheduler.long_prefill_token_threshold}")
    options.append(f"chunked prefill {'on' if scheduler.enable_chunked_prefill else 'off'}")
    options.append("pfx's batch-invariant kernels" if linear.installed() else "vLLM's own kernels")
    return f"vLLM {vllm.__version__} ({model}, {dtype}, {', '.join(options)})"


def conform(model: str, *, dtype: str = "float32", block_size: int = 32, max_num_batched_tokens: Optional[int] = None,
            enable_chunked_prefill: bool = True, budget: str = "default", seed: int = 1,
            rule_chunk: Optional[int] = None, max_grid: Optional[int] = None, prompts: Optional[int] = None,
            progress: Optional[Callable[[int, int], None]] = None, batch_invariant: bool = True,
            certify: Optional[str] = None, **engine_args):
    """Starts vLLM on `model` in this process with the configuration given (pfx's plugin off), checks it
    through its prefix cache, and returns the pfx.ConformReport (str(): `pfx conform`'s text;
    to_json(); exit_status). `rule_chunk` (default: the block size, the plugin's default chunk) must be
    a multiple of the block size. With `certify`, a file to write the certificate of what the check
    proved (premises.certificate()) where its verdict is safe; none is written otherwise (a check that
    certifies resumes from rows decode wrote as a certificate needs, DECODE_EVIDENCE). Raises
    ValueError for bad input, CheckError when vLLM did not resume where the check led it, OSError when
    the certificate cannot be written."""
    refuse_plugin()
    _budget(budget, seed, max_grid, prompts)  # bad input is refused before vLLM starts (tens of seconds)
    _rule_chunk(rule_chunk, block_size)
    llm = start(model, dtype=dtype, block_size=block_size, max_num_batched_tokens=max_num_batched_tokens,
                enable_chunked_prefill=enable_chunked_prefill, batch_invariant=batch_invariant, **engine_args)
    config = llm.llm_engine.vllm_config
    # As the plugin would serve this configuration, with the Config it would decide with (rule_config):
    # every offset with pfx's batch-invariant kernels, where a one-token step computes as a longer one;
    # with vLLM's own, only where the step premise allows; a speculative method's padded admission.
    judged = _premises.Premises(batch_invariant=batch_invariant, one_token_step_alone=not batch_invariant,
                                source="the check's kernels")
    block = config.cache_config.block_size
    rule = _rule.rule_config(config, judged, block)
    report = check(Engine(llm), name=describe(llm, model), vocab=config.model_config.get_vocab_size(),
                   block_size=block, max_length=config.model_config.max_model_len,
                   budget=budget, seed=seed, rule_chunk=rule_chunk, max_grid=max_grid, prompts=prompts,
                   progress=progress, rule=rule, decode_evidence=DECODE_EVIDENCE if certify is not None else None,
                   step_tokens=config.scheduler_config.max_num_batched_tokens)
    if certify is not None and report.exit_status == 0:
        write_certificate(certify, _premises.certificate(_premises.configuration(config, batch_invariant),
                                                         json.loads(report.to_json()), rule.prefill_step))
    return report


def write_certificate(path: str, certificate: dict) -> None:
    """Writes `certificate` to `path` whole or not at all (a temporary file renamed over it)."""
    directory = os.path.dirname(os.path.abspath(path))
    with tempfile.NamedTemporaryFile("w", dir=directory, delete=False, suffix=".tmp", encoding="utf-8") as file:
        json.dump(certificate, file, indent=1, sort_keys=True)
        file.write("\n")
        temporary = file.name
    try:
        os.replace(temporary, path)
    except OSError:
        os.unlink(temporary)
        raise


def _budget(name: str, seed: int, max_grid: Optional[int], prompts: Optional[int]) -> dict:
    budget = _native.conform_budget(name)
    for key, value in (("seed", seed), ("max_grid", max_grid), ("prompts", prompts)):
        if value is not None:
            budget[key] = whole(key, value, 0 if key == "seed" else 1, BadInput)
    return budget


def _rule_chunk(rule_chunk: Optional[int], block_size: int) -> int:
    whole("block_size", block_size, 1, BadInput)
    if whole("rule_chunk", rule_chunk, 1, BadInput, none="the block size") is None:
        return block_size
    reason = _rule.off_the_block_grid(rule_chunk, block_size, "rule_chunk")
    if reason:
        raise BadInput(reason)
    return rule_chunk


def check(engine, *, name: str, vocab: int, block_size: int, max_length: int, budget: str = "default",
          seed: int = 1, rule_chunk: Optional[int] = None, max_grid: Optional[int] = None,
          prompts: Optional[int] = None, progress: Optional[Callable[[int, int], None]] = None,
          rule=None, decode_evidence: Optional[tuple] = None, step_tokens: Optional[int] = None):
    """The check on `engine` (serve(prompt, max_tokens) -> Served, reset(); serve_batch(prompts,
    max_tokens) -> [Served] for the batching finding, which is left out without it), whose prefix cache
    has blocks of `block_size` tokens and which serves prompts of up to `max_length` tokens with their
    output. `rule` is the pfx.Config the plugin decides with (pfx.integrations.vllm.rule.rule_config;
    default: no prefill step, no admission padding): the check judges each grid with it, its chunk the
    grid, and resumes only where the rule would. `decode_evidence` (prompts, resumes a prompt) sets how
    many resumes from rows decode wrote the check makes (default: one a prompt of the budget), and
    `step_tokens` (the engine's prefill step, vLLM's max_num_batched_tokens) how long its prompts grow.
    Returns a pfx.ConformReport."""
    if rule is None:
        rule = _native.Config(enabled=True, keep_min=0, chunk=block_size)
    return _Check(engine, name, vocab, block_size, max_length, _budget(budget, seed, max_grid, prompts),
                  _rule_chunk(rule_chunk, block_size), progress, rule, decode_evidence, step_tokens).run()


BESIDE = 3
"""Prompts batched beside each prompt of the batching finding."""
EVIDENCE_LONGEST = 2048
"""The longest prompt of a check that certifies, in tokens, unless the prefill step asks for a longer one or
the model holds less (evidence_lengths())."""
DECODE_EVIDENCE = (20, 10)
"""Prompts, and resumes from rows decode wrote a prompt, of a check that certifies: 200 resumes, the
least from which a certificate says decode rows are exact (premises.DECODE_ROWS_RESUMES), served alone,
in batches of every size of premises.DECODE_ROWS_BATCH_SIZES, and joining another mid-decode."""


class _Check:
    def __init__(self, engine, name, vocab, block, max_length, budget, rule_chunk, progress, rule,
                 decode_evidence=None, step_tokens=None):
        if vocab < 1:
            raise ValueError("the vocabulary must hold at least 1 token")
        if not isinstance(rule, _native.Config):
            raise BadInput(f"rule: expected a pfx.Config, got {type(rule).__name__}")
        self.engine, self.name, self.vocab, self.block, self.max_length = engine, name, vocab, block, max_length
        self.budget, self.rule_chunk, self.progress = budget, rule_chunk, progress
        self.rule = rule
        self.decode_evidence, self.step_tokens = decode_evidence, step_tokens
        # vLLM resumes only at block bounds: the grids are the block size and its doublings up to the
        # budget's max grid (at least the block), and the rule chunk.
        budget["max_grid"] = max(budget["max_grid"], block)
        grids = {rule_chunk}
        grid = block
        while grid <= budget["max_grid"]:
            grids.add(grid)
            grid *= 2
        self.grids = [{"grid": g, "resumes": 0, "skipped": 0, "mismatch": None} for g in sorted(grids)]
        # A prompt and its output fit the model; a held run is at most the prompt and a block.
        room = max_length - GENERATED - block
        self.lengths = [n for n in _native.conform_prompt_lengths(sorted(grids)) if n <= room]
        if not self.lengths:
            raise ValueError(f"a model of {max_length} positions holds none of the check's prompts")
        self.random = random.Random(budget["seed"])
        self.prompts = self.cold_runs = self.prefilled = 0
        self.cold_disagreement = None

    def run(self):
        start = time.monotonic()
        premise_failure = self.premises()
        decode_rows = None
        if premise_failure is None:
            total = len(self.lengths) * self.budget["prompts"]
            for n in self.lengths:
                for _ in range(self.budget["prompts"]):
                    self.check_prompt(self.tokens(n))
                    if self.progress:
                        self.progress(self.prompts, total)
            decode_rows = self.decode_rows()
            batching = self.batching() if hasattr(self.engine, "serve_batch") else None
        else:
            batching = None
        skipped = any(grid["skipped"] for grid in self.grids)
        return _native.conform_observed(
            engine=self.name, budget=self.budget, chunk=self.block, rule_chunk=self.rule_chunk, vocab=self.vocab,
            lengths=self.lengths, prompts=self.prompts, cold_runs=self.cold_runs, prefilled_tokens=self.prefilled,
            premises_checked=PREMISES_CHECKED, premise_failure=premise_failure, cold_disagreement=self.cold_disagreement, grids=self.grids,
            decode_rows=decode_rows, elapsed_s=time.monotonic() - start,
            skip_reason=self.skip_reason() if skipped else None, batching=batching)

    def tokens(self, n, draw=None):
        draw = draw or self.random
        return [draw.randrange(self.vocab) for _ in range(n)]

    def serve(self, prompt, max_tokens=GENERATED, cached=0):
        """Serves `prompt` from what the cache holds, which must give vLLM exactly `cached` tokens."""
        return self.took(prompt, self.engine.serve(prompt, max_tokens), cached)

    def took(self, prompt, served, cached):
        """`served`, what `prompt` was served, counted; CheckError where vLLM did not take exactly `cached`
        tokens from the cache."""
        self.prefilled += len(prompt) - served.cached
        if served.cached != cached:
            raise CheckError(f"vLLM took {served.cached} cached tokens of a {len(prompt)}-token prompt where the "
                             f"check led it to take {cached}: the check would not compare what it says (is the "
                             f"KV cache too small to hold the warmed blocks, or is the block size not {self.block}?)")
        return served

    def cold(self, prompt, max_tokens=GENERATED):
        self.engine.reset()
        return self.serve(prompt, max_tokens)

    def premises(self):
        """docs/conform.md, "Premises", on what vLLM serves: two prompts of the longest length that differ
        in every token give finite logprobs and different outputs. Returns (premise, detail) or None."""
        draw = random.Random(self.budget["seed"] ^ PREMISE_SEED_MASK)
        n = self.lengths[-1]
        first = self.tokens(n, draw)
        runs = [self.cold(first)]
        if self.vocab > 1:
            runs.append(self.cold([(t + 1) % self.vocab for t in first]))
        for run in runs:
            for step, logprob in enumerate(run.logprobs):
                if not math.isfinite(logprob):
                    return ("finite logits", f"the logprob of generated token {step} of a {n}-token cold run is "
                                             f"{logprob}, not finite")
        if len(runs) == 2 and first_difference(runs[0], runs[1]) is None:
            return ("logits depend on tokens", f"two {n}-token prompts that differ in every token gave the same "
                                               f"generated tokens and logprobs, bit for bit")
        return None

    def held_for(self, prompt, offset):
        """prompt[:offset] and 0 .. block tokens of another continuation (its first differs from prompt[offset])."""
        tail = [self.random.randrange(self.vocab) for _ in range(self.random.randrange(self.block + 1))]
        if tail and tail[0] == prompt[offset]:
            tail[0] = (tail[0] + 1) % self.vocab
        return list(prompt[:offset]) + tail

    def check_prompt(self, prompt):
        number = self.prompts
        self.prompts += 1
        reference = self.cold(prompt)
        for run in range(1, self.budget["cold_runs"]):
            difference = first_difference(self.cold(prompt), reference)
            if difference and self.cold_disagreement is None:
                self.cold_disagreement = {"prompt_number": number, "prompt": prompt, "run": run,
                                          "difference": difference}
        self.cold_runs += self.budget["cold_runs"]
        for grid in self.grids:
            if grid["mismatch"]:
                continue  # one counterexample per grid is enough
            config = _rule.on_grid(self.rule, grid["grid"])
            for offset in _native.conform_offsets(len(prompt), grid["grid"], self.budget, self.random.getrandbits(64)):
                if _native.decide(config, prompt[:offset], offset, prompt).offset != offset:
                    grid["skipped"] += 1  # the rule never resumes there: nothing the plugin serves to judge
                    continue
                held = self.held_for(prompt, offset)
                # The held run alone in the cache, its prefill's rows only (one token generated: no decode row).
                self.cold(held, max_tokens=1)
                resumed = self.serve(prompt, cached=offset)
                grid["resumes"] += 1
                difference = first_difference(resumed, reference)
                if difference:
                    grid["mismatch"] = {"prompt_number": number, "prompt": prompt, "held": held, "offset": offset,
                                        "difference": difference}
                    break

    def skip_reason(self) -> str:
        return _native.conform_skip_reason(self.rule.prefill_step)  # pfx conform's words, from the same C++ code

    def batching(self):
        """Each of the budget's prompts served cold alone and cold in one batch with BESIDE others (each
        of a length of the check's, tokens of its own), its output compared; the check stops at the first
        difference. A difference is batching's alone: the rule's guarantee is for a request served alone."""
        finding = {"batches": 0, "mismatch": None}
        for number in range(self.budget["prompts"]):
            prompt = self.tokens(self.random.choice(self.lengths))
            beside = [self.tokens(self.random.choice(self.lengths)) for _ in range(BESIDE)]
            alone = self.cold(prompt, GENERATED)
            self.engine.reset()
            where = self.random.randrange(BESIDE + 1)
            batch = beside[:where] + [prompt] + beside[where:]
            served = self.engine.serve_batch(batch, GENERATED)
            self.prefilled += sum(len(p) - s.cached for p, s in zip(batch, served))
            finding["batches"] += 1
            difference = first_difference(served[where], alone)
            if difference:
                finding["mismatch"] = {"prompt_number": number, "prompt": prompt, "beside": beside,
                                       "difference": difference}
                break
        return finding

    def decode_rows(self):
        """Resumes from rows decode wrote: a prompt of k blocks and a part generates 2 blocks, and then that
        prompt, its output but the last token and a few more tokens (1 to a block: the resume's last
        block part prompt, part decode, and its step ending anywhere), whose cached rows reach past the
        first prompt's end, is served, and compared with a cold run. By default one such resume a prompt
        of the budget; with `decode_evidence`, its prompts each resumed its count of times
        (decode_evidence())."""
        if self.decode_evidence is not None:
            return self.decode_evidence_rows()
        finding = self.decode_finding()
        for _ in range(self.budget["prompts"]):
            n = self.block * self.random.randrange(1, 4) + self.random.randrange(1, self.block)
            extra = self.random.randrange(1, self.block + 1)
            if n + 2 * self.block - 1 + extra + GENERATED > self.max_length:
                break  # the model holds no such prompt and its output
            prompt = self.tokens(n)
            warm, rows = self.decoded(prompt)
            held = prompt + list(warm.tokens[:-1])
            resumed_prompt = held + self.tokens(extra)
            resumed = self.serve(resumed_prompt, cached=len(held) // self.block * self.block)
            differs = self.compared_from_decode_rows(finding, n, held, resumed_prompt, resumed)
            self.rows_compared(finding, n, held, rows)
            if differs:
                break
        return finding

    def decode_evidence_rows(self):
        """decode_rows() as a certificate needs it: `decode_evidence`'s prompts (draws of their own), each
        resumed its count of times, each run's first new token its own so that no resume finds another's
        block: the resumes first, on the held run's rows, served as serve_resumes() serves them, then
        their cold runs, each alone; then the held run's rows and logprobs against a cold prefill's
        (rows_compared(), rescored()). It stops after the prompt of the first resume that differs."""
        finding = self.decode_finding()
        prompts, each = self.decode_evidence
        draw = random.Random(f"{self.budget['seed']}:decode rows")
        # One batch a prompt, every size of DECODE_ROWS_BATCH_SIZES where there are prompts enough.
        sizes = list(_premises.DECODE_ROWS_BATCH_SIZES)[:prompts]
        sizes += [draw.choice(_premises.DECODE_ROWS_BATCH_SIZES) for _ in range(prompts - len(sizes))]
        draw.shuffle(sizes)
        if each > self.vocab:
            return finding  # no token to start each run with a token of its own
        for size, n in zip(sizes, self.evidence_lengths(prompts, draw)):
            prompt = self.tokens(n, draw)
            warm, rows = self.decoded(prompt)
            held = prompt + list(warm.tokens[:-1])
            resumed = [held + [start] + self.tokens(draw.randrange(0, self.block), draw)
                       for start in draw.sample(range(self.vocab), each)]
            for resumed_prompt, served, kind in self.serve_resumes(resumed, held, size, draw, finding):
                if self.compared_from_decode_rows(finding, n, held, resumed_prompt, served, kind):
                    break  # the first mismatch is named; the held run's rows and logprobs still say why
            self.rows_compared(finding, n, held, rows)
            self.rescored(finding, prompt, warm)
            if finding["mismatch"]:
                return finding
        return finding

    def evidence_lengths(self, prompts, draw):
        """The lengths of the decode evidence's `prompts` prompts, shortest first: whole blocks spread evenly
        on a log scale from 1 to the most the longest may have, each with a part block of 1 to block - 1
        tokens (its run's decode then starts inside a block). The longest is EVIDENCE_LONGEST tokens, or
        twice the engine's prefill step and two blocks where that is longer, as far as the model holds it
        with its output and a resume: the evidence crosses every power of two of the block, the prefill
        step (a cold prefill of a held run chunked) and the kernels' tiles between. Empty where the model
        holds no such prompt."""
        room = self.max_length - 3 * self.block - GENERATED  # a held run: the prompt and 2 blocks less one; a resume: a block more
        longest = min(room, max(EVIDENCE_LONGEST, 2 * (self.step_tokens or 0) + 2 * self.block))
        most = longest // self.block - 1
        if most < 1:
            return []
        return [self.block * max(1, round(most ** (i / max(prompts - 1, 1)))) + draw.randrange(1, self.block)
                for i in range(prompts)]

    def rescored(self, finding, prompt, warm):
        """The logprobs decode computed in `warm` (`prompt` served cold: each generated token's logprob but
        the first is read from the row decode wrote for the token before it) against a cold prefill of
        the prompt and every generated token rescoring them (prompt logprobs), bit for bit, counted in
        `finding`. The first generated token's logprob is read from the prompt's last row, which prefill
        wrote: not compared. Nothing where the engine cannot rescore."""
        if not hasattr(self.engine, "rescore"):
            return
        sequence = list(prompt) + list(warm.tokens)
        rescoring = self.engine.rescore(sequence)
        self.prefilled += len(sequence)
        for i in range(1, len(warm.tokens)):
            finding["rescored"] += 1
            if not same_bits(warm.logprobs[i], rescoring[len(prompt) + i]):
                finding["rescoring_differs"] += 1

    def serve_resumes(self, prompts, held, batch, draw, finding):
        """`prompts`, each resuming on the rows of `held`, served: `batch` of them in one batch (with
        serve_batch()), two more as a pair of which one joins the other after 1 to GENERATED - 1 of its
        steps, while it decodes (with serve_joining()), the rest alone; each must take the held run's
        whole blocks. Returns (prompt, Served, how it was served) each."""
        cached = len(held) // self.block * self.block
        batch = min(batch, len(prompts)) if hasattr(self.engine, "serve_batch") and len(prompts) > 1 else 0
        pair = 2 if hasattr(self.engine, "serve_joining") and len(prompts) - batch >= 2 else 0
        alone = len(prompts) - batch - pair
        served = [(p, self.serve(p, cached=cached), "alone") for p in prompts[:alone]]
        if batch:
            together = prompts[alone:alone + batch]
            served += [(p, self.took(p, s, cached), "batched")
                       for p, s in zip(together, self.engine.serve_batch(together, GENERATED))]
            finding["batch_sizes"] = sorted(set(finding["batch_sizes"]) | {batch})
        if pair:
            first, second = prompts[alone + batch:]
            joined = self.engine.serve_joining(first, second, draw.randrange(1, GENERATED), GENERATED)
            served += [(p, self.took(p, s, cached), "joining") for p, s in zip((first, second), joined)]
        return served

    @staticmethod
    def decode_finding() -> dict:
        """The decode rows' finding before any resume: how many were compared, how they were served (alone,
        batched with others, joining another mid-decode; the sizes of the batches), the first mismatch; the
        logprobs rescored, and the K and V blocks compared byte for byte, and how many of each differed."""
        return {"resumes": 0, "mismatch": None, "canonical_end": 0, "alone": 0, "batched": 0, "joining": 0,
                "batch_sizes": [], "rescored": 0, "rescoring_differs": 0, "kv_blocks": 0, "kv_blocks_differ": 0}

    def decoded(self, prompt):
        """`prompt` served cold, two blocks of tokens generated (decode writes a row for each but the last):
        (Served, its K and V rows as the engine held them after decoding, serve_reading_rows(); None where
        the engine cannot read them)."""
        if not hasattr(self.engine, "serve_reading_rows"):
            return self.cold(prompt, max_tokens=2 * self.block), None
        return self.cold_reading_rows(prompt, 2 * self.block)

    def cold_reading_rows(self, prompt, max_tokens):
        """cold() with the rows the engine held for `prompt` after it (serve_reading_rows()): (Served, rows)."""
        self.engine.reset()
        served, rows = self.engine.serve_reading_rows(prompt, max_tokens)
        return self.took(prompt, served, 0), rows

    def rows_compared(self, finding, n, held, rows):
        """The K and V rows of `held` (a prompt of `n` tokens and the tokens decode wrote rows for), `rows`
        as the engine held them after decoding, against a cold prefill's of `held` (chunked as the engine
        chunks it), byte for byte: every whole block (the most a prefix cache reuses) that holds a row
        decode wrote, of every layer, counted in `finding` (kv_blocks; kv_blocks_differ, a block missing on
        either side counted as differing). Nothing where the engine could not read its rows. The cold
        prefill resets the cache: it comes after the resumes from the rows decode wrote."""
        if rows is None:
            return
        _, prefilled = self.cold_reading_rows(held, 1)
        whole = len(held) // self.block
        for layer in sorted(set(rows) | set(prefilled)):
            blocks, cold = rows.get(layer, []), prefilled.get(layer, [])
            for block in range(n // self.block, whole):
                finding["kv_blocks"] += 1
                if block >= len(blocks) or block >= len(cold) or blocks[block] != cold[block]:
                    finding["kv_blocks_differ"] += 1

    def compared_from_decode_rows(self, finding, n, held, resumed_prompt, resumed, served="alone") -> bool:
        """`resumed` (served on the rows of `held`, from a prompt of `n` tokens; `served` alone, batched or
        joining) against the cold run of `resumed_prompt`, served alone, counted in `finding`; True where
        they differ (the finding then names it)."""
        reference = self.cold(resumed_prompt)
        finding["resumes"] += 1
        finding[served] += 1
        difference = first_difference(resumed, reference)
        if difference:
            finding["mismatch"] = {"prompt_number": finding["resumes"] - 1, "prompt": resumed_prompt, "held": held,
                                   "offset": resumed.cached, "difference": difference}
            finding["canonical_end"] = n
        return difference is not None


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m pfx.integrations.vllm.conform", description=__doc__.split("\n\n")[0],
        epilog="Verdicts and exit statuses: 0 safe (the rule chunk is exact), 1 unsafe (a resume on it differs "
               "from its cold run), 4 nondeterministic (cold runs of one prompt differ), 5 no exact grid, "
               "6 degenerate (the model's answers ignore the prompt, or are not finite), 2 bad input, 3 no verdict "
               "(vLLM did not resume where the check led it), 74 the certificate could not be written.")
    parser.add_argument("model", help="a model vLLM loads (a directory or a name)")
    parser.add_argument("--dtype", default="float32", help="vLLM's dtype (default float32)")
    parser.add_argument("--block-size", type=int, default=32,
                        help="vLLM's block size, the finest grid it resumes on (default 32)")
    parser.add_argument("--max-num-batched-tokens", type=int, default=None,
                        help="vLLM's max_num_batched_tokens, the step of a chunked prefill (default vLLM's)")
    parser.add_argument("--max-num-scheduled-tokens", type=int, default=None,
                        help="vLLM's cap of a step below max_num_batched_tokens (default none)")
    parser.add_argument("--long-prefill-token-threshold", type=int, default=None,
                        help="vLLM's long_prefill_token_threshold (default none; vLLM drops it for a request alone)")
    parser.add_argument("--no-chunked-prefill", action="store_true",
                        help="vLLM prefills a whole prompt in one step (default: chunked prefill on)")
    parser.add_argument("--max-model-len", type=int, default=None, help="vLLM's max_model_len (default the model's)")
    parser.add_argument("--budget", choices=("quick", "default", "thorough"), default="default",
                        help="how many prompts, offsets and cold runs, as pfx conform's budgets (default default)")
    parser.add_argument("--seed", type=int, default=1, help="the seed of the check's prompts (default 1)")
    parser.add_argument("--rule-chunk", type=int, default=None,
                        help="the chunk the plugin would be given, a multiple of the block size (default the block "
                             "size, the plugin's default)")
    parser.add_argument("--vllm-kernels", action="store_true",
                        help="keep vLLM's own kernels, as PFX_VLLM_BATCH_INVARIANT=0 does for the plugin (default: "
                             "vLLM computes batch invariantly, as the plugin makes it)")
    parser.add_argument("--json", action="store_true", help="print the report as pfx conform --json does")
    parser.add_argument("--certify", metavar="FILE", default=None,
                        help="where the verdict is safe, write a certificate of what the check proved, for the "
                             "configuration it ran (vLLM and torch versions, platform and CPU features, dtype, block "
                             "size, kernel settings, the model's identity), which the plugin takes as "
                             "PFX_VLLM_CERTIFICATE=FILE; none is written otherwise (default: none)")
    arguments = parser.parse_args(argv)
    # vLLM's engine core in this process, so that its KV cache can be read (Engine.serve_reading_rows).
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    engine_args = {name: value for name, value in (("max_model_len", arguments.max_model_len),
                                                   ("max_num_scheduled_tokens", arguments.max_num_scheduled_tokens),
                                                   ("long_prefill_token_threshold",
                                                    arguments.long_prefill_token_threshold)) if value is not None}
    try:
        report = conform(arguments.model, dtype=arguments.dtype, block_size=arguments.block_size,
                         max_num_batched_tokens=arguments.max_num_batched_tokens,
                         enable_chunked_prefill=not arguments.no_chunked_prefill, budget=arguments.budget,
                         seed=arguments.seed, rule_chunk=arguments.rule_chunk,
                         batch_invariant=not arguments.vllm_kernels, certify=arguments.certify, **engine_args)
    except (ValueError, PluginOn) as error:
        print(f"{parser.prog}: {error}", file=sys.stderr)
        return 2
    except OSError as error:
        print(f"{parser.prog}: the certificate was not written: {error}", file=sys.stderr)
        return 74
    except Exception as error:  # noqa: BLE001 - no verdict: never an exit status a verdict has
        print(f"{parser.prog}: no verdict: {type(error).__name__}: {error}", file=sys.stderr)
        return 3
    print(report.to_json() if arguments.json else str(report), end="\n" if arguments.json else "")
    if arguments.certify is not None:
        print(f"{parser.prog}: " + (f"certificate written to {arguments.certify}" if report.exit_status == 0 else
                                    "no certificate written: the verdict is not safe"), file=sys.stderr)
        unproved = _premises.decode_rows_unproved(json.loads(report.to_json()).get("decode_rows"))
        if report.exit_status == 0 and unproved:
            print(f"{parser.prog}: the certificate does not prove rows decode wrote equal to a prefill's: "
                  + "; ".join(unproved), file=sys.stderr)
    return report.exit_status


if __name__ == "__main__":
    sys.exit(main())
