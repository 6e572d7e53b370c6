#pragma once

/// \file
/// The requirements beside the invariant catalogue that pfx promises and the tests verify: the
/// original class's audits, its rule, the memory bound, bit-exact resume, the driver's guarantees, the pfx program's and the Python
/// module's. Like every INV of the catalogue, each
/// must have a test (proptest/spec/requirements_check.cpp).

#include <array>
#include <string_view>

namespace pfx::spec {

struct Requirement {
  std::string_view id;
  std::string_view statement;
};

inline constexpr std::array requirements = {
    Requirement{"AUDIT-253", "a stale KV is never read as the current context"},
    Requirement{"AUDIT-259", "reuse is on by default, with the original class's keep_min"},
    Requirement{"AUDIT-260", "a row decode wrote is never offered for reuse"},
    Requirement{"SEED-1", "with chunk = 1 the offset equals the original class's rule"},
    Requirement{"MEM-1",
                "4 bytes per token of the record's capacity and of the begun prompt's, plus a "
                "constant; begins, commits and records within the reserved capacity never allocate; "
                "past it they may throw std::bad_alloc and change nothing"},
    Requirement{"SAFE",
                "whenever the machine offers offset o for prompt P, every row below o holds exactly "
                "what a cold prefill of P on the current chunk grid writes there (the ghost state)"},
    Requirement{"THM-1",
                "with chunk = the engine's prefill grid, a resumed prefill writes the prompt's rows "
                "and the first logit bit for bit as a cold run; with deterministic decode, so are "
                "the generated tokens and their rows"},
    Requirement{"CEX-1",
                "the bit-exactness check can fail: the original class's rule (chunk = 1) and reuse past "
                "canonical_end each make some resumed run differ from cold"},
    Requirement{"DRV-1", "the KV state is allocated once, at full capacity, and never reallocated"},
    Requirement{"DRV-2",
                "rows a request gives up are poisoned with NaN, and an engine that reads one is "
                "caught: the request is aborted with an error"},
    Requirement{"DRV-3",
                "a bad request (empty prompt, token outside the vocabulary, more tokens than the "
                "capacity) is refused with an error naming the problem; record and KV state unchanged"},
    Requirement{"DRV-4",
                "after any mix of engine failures, the record holds only valid rows and every later "
                "response still equals cold bit for bit"},
    Requirement{"DRV-5",
                "TF_GLM53_PREFIX_CACHE and TF_GLM53_PREFIX_CACHE_MIN keep the original class's meanings and "
                "defaults; a malformed value is an error naming the variable"},
    Requirement{"DRV-6",
                "the CUDA backend keeps the same claims on a device, and says why when it cannot run"},
    Requirement{"DRV-7",
                "a lane called from several threads at once serializes serve() and clear(): every "
                "response still equals cold bit for bit, and the record is one whole request's"},
    Requirement{"DRV-8",
                "a lane drives an engine that owns its cache through forget, synchronize and an optional read of "
                "rows as bytes in the engine's format: every response equals a cold run bit for bit, and a cold "
                "run or a check reuses one KV state instead of allocating one per run"},
    Requirement{"DRV-9",
                "driver::verify and pfx.verify serve a user's trace through a lane on their engine and compare every "
                "response (generated tokens, logits, rows where readable) with a cold run; a mismatch, a failed "
                "request, or a run that compared nothing is not ok"},
    Requirement{"SHARD-1",
                "a KV state sharded over N ranks (the row of position p on rank (p / interleave) mod N) "
                "holds the same rows, and a lane over it gives the same responses, bit for bit, as one state"},
    Requirement{"SHARD-2",
                "every rank of a sharded lane reuses the same offset; when the ranks' decisions or records "
                "differ, no rank reuses: every rank clears its record, serves the request cold and reports it"},
    Requirement{"SHARD-3",
                "a sharded write commits only when every rank's write succeeded; a failure on any rank aborts "
                "it on every rank, and every record keeps the same valid prefix"},
    Requirement{"SHARD-4",
                "each rank of a decode-context-parallel lane holds only its own KV rows (shard_capacity: about "
                "capacity / ranks, what kv_bytes_per_rank reports); forget, poison and reads act on them by their "
                "local length local_len(p, r), the rows of positions below p that rank r holds"},
    Requirement{"SHARD-5",
                "THM-1 under sharding: when each rank attends only its own rows and every rank merges the ranks' "
                "partial results (output, log-sum-exp) in rank order in fp32, a resume on the chunk grid equals the "
                "cold run of the same ranks and interleave bit for bit: logits, generated tokens and every rank's "
                "rows; a resume off the grid can differ, at a multiple of ranks x interleave too"},
    Requirement{"CLI-1",
                "pfx replay serves every request of a trace through a lane; with --verify each "
                "response is compared with a cold run bit for bit, and a mismatch exits with status 1"},
    Requirement{"CLI-2",
                "a malformed trace line, option or input file exits with status 2 and a message that "
                "names the line and the field; nothing is replayed"},
    Requirement{"CLI-3",
                "pfx audit checks the invariant catalogue at run time (the bounded exhaustive domain "
                "and seeded random cases) and fails on any violation; given the traceability table the tests' "
                "build writes, it prints it and fails on an ID without a row or a test, and without one it says "
                "that the table was not checked"},
    Requirement{"CLI-4", "pfx explain prints the decision for a record and a prompt, and the bound that decided it"},
    Requirement{"CLI-5",
                "pfx replay --engine none holds no KV state and runs no model, yet every request's offset, reason "
                "and prefill and the totals are those of a replay on a real engine of the same chunk, with or without "
                "injected failures; it refuses --verify, having nothing to compare"},
    Requirement{"SOAK-1",
                "pfx soak serves a long stream of mixed traffic with injected failures through one lane; "
                "every sampled response equals a cold run bit for bit, resident memory stays flat after "
                "the warm-up, and a mismatch, a stale-row read or growth past the tolerance exits with status 1"},
    Requirement{"CONF-1",
                "the conformance check finds, on an engine, the smallest grid on which every resume equals its "
                "cold run bit for bit (KV rows and logits), tells a non-deterministic engine (two cold runs "
                "differ) from one that depends on something else, and names the first mismatch of every other grid"},
    Requirement{"CONF-2",
                "pfx conform runs the check on a shipped engine and exits 0 when the rule chunk is on an exact grid, "
                "1 when it is not (printing the safe one), 4 when the engine is not deterministic, 5 when no grid is exact, "
                "6 when it is degenerate and 2 on bad input"},
    Requirement{"CONF-3",
                "pfx.conform runs the same check on an engine written in Python; on a PyTorch transformer its "
                "verdict is confirmed independently: a grid it calls exact gives a Python lane no mismatch over a "
                "multi-turn workload, and the mismatch it names on an unsafe grid is reproduced"},
    Requirement{"CONF-4",
                "before judging grids the check establishes its premises (the engine writes the rows it is asked "
                "to, its logits are finite and depend on the tokens); an engine that fails one is called "
                "degenerate, naming the premise, never safe"},
    Requirement{"PY-4",
                "pfx.Lane serves requests through the C++ lane on an engine written in Python, of either form "
                "(one that owns its cache, one that writes pfx's KV state); its responses with reuse equal those "
                "of a lane without reuse bit for bit; TransformersEngine adapts a transformers causal LM, and "
                "LlamaCppEngine a llama-cpp-python model"},
    Requirement{"PY-1",
                "pfx.PromptPrefix answers, records and clears as the original Python class does on every call "
                "sequence the original class handles correctly, with the same environment variables and defaults"},
    Requirement{"PY-2",
                "where the original Python class misbehaves, pfx.PromptPrefix raises an error that names the "
                "problem and changes nothing"},
    Requirement{"PY-3",
                "pfx.Machine exposes the whole protocol to Python; a refused event raises an error "
                "naming the refusal and changes nothing"},
    Requirement{"VLLM-1",
                "with pfx's vLLM plugin on, only rows a prefill wrote enter vLLM's prefix cache: a block holding "
                "a row that decode wrote is never offered to a later request, unless a certificate of the "
                "configuration served proves such rows exact (conform --certify: 200 resumes from them, served "
                "alone, beside 1 to 7 others and joining another mid-decode, none differing, and decode's "
                "logprobs equal to a prefill's rescoring bit for bit, and the K and V rows decode wrote equal "
                "to a cold prefill's byte for byte; never with speculative decoding), and "
                "every resumed response equals its cold run, "
                "tokens and logprobs, where stock vLLM's differ"},
    Requirement{"VLLM-2",
                "with pfx's vLLM plugin on, each prefix-cache hit is cut by pfx's core rule (at least one token "
                "left, aligned down to the chunk, keep_min): vLLM's num_cached_tokens is pfx's offset, never more, "
                "and each decision is counted and logged with its reason"},
    Requirement{"VLLM-3",
                "pfx's vLLM plugin is loaded through vLLM's vllm.general_plugins entry point in every vLLM process, "
                "is off unless PFX_VLLM (or enable()) turns it on, leaves vLLM unchanged when off, and refuses a "
                "malformed knob, a chunk off vLLM's block grid and an untested vLLM version with an error naming them"},
    Requirement{"VLLM-4",
                "pfx.integrations.vllm.conform checks vLLM through its own prefix cache: each resume at a multiple "
                "of a candidate grid takes exactly its offset from the cache (else an error, never a verdict) and "
                "is compared with repeated cold runs, generated tokens and logprobs bit for bit, and rows decode "
                "wrote are tried apart; the verdict, text, JSON and exit status are pfx conform's, from the same "
                "code, and a check that compared nothing is never safe"},
    Requirement{"VLLM-5",
                "with pfx's vLLM plugin on, a hit shorter than vLLM's is looked up again at its length by vLLM's "
                "own lookup, for every KV cache group (full attention, sliding window, chunked local), never "
                "sliced, and every resumed response of a hybrid or all-sliding-window model equals its cold run; a "
                "model with layers whose hits cannot be cut exactly (Mamba and other state-space layers, windows "
                "replayed after a hit) is refused at start, naming the layers"},
    Requirement{"VLLM-6",
                "the plugin's one-token-step premise is the core's prefill-step bound (INV-12), a premise of the "
                "configuration served, never assumed: none on pfx's batch-invariant kernels (where every such "
                "resume equals its cold run), the step on vLLM's own kernels in float32, a certificate's from "
                "conform --certify for that very configuration, and a refusal by name for anything else (vLLM's "
                "own kernels in bfloat16 or float16, another platform); the step passed is the "
                "step vLLM's scheduler takes for a request served alone: max_num_scheduled_tokens, at most "
                "max_num_batched_tokens less a speculative method's draft slots, the whole prompt without chunked "
                "prefill, and not the long-prefill threshold, which vLLM drops for a request alone"},
    Requirement{"VLLM-7",
                "no row decode wrote enters vLLM's prefix cache on any path vLLM takes: a request's blocks are "
                "cached up to the end of the first prompt it was given, through streaming-input sessions, "
                "preemption and recompute, and a prefix-cache reset with requests running; a KV connector is "
                "refused at start"},
    Requirement{"VLLM-8",
                "the plugin is never silently absent: with PFX_VLLM set, a vLLM that did not load it (VLLM_PLUGINS "
                "not naming it, a failed import) stops at start with an error that says why, and a malformed knob, "
                "a chunk off vLLM's block grid or a configuration the plugin refuses stops the start before the "
                "model loads, with a message that says what each value means for vLLM"},
    Requirement{"VLLM-9",
                "with the plugin on, a request's answer equals its cold run served alone whatever vLLM batches "
                "beside it (requests sharing prefill steps, a request joining while another decodes, clients in "
                "flight at once through the OpenAI server), in float32 and bfloat16: the plugin makes vLLM compute "
                "batch invariantly (the CPU build's linear layers in calls of a fixed row count, its attention "
                "KV split off and every query token attended as a decode step attends it, at any context length; "
                "vLLM's batch-invariant mode on CUDA) and says at start what it set and why; "
                "PFX_VLLM_BATCH_INVARIANT=0 keeps vLLM's kernels and says the guarantee is then for a "
                "request served alone; a vLLM variable set otherwise is refused by name; "
                "pfx.integrations.vllm.conform's batching finding says whether an answer depends on its batch, with "
                "a counterexample: not under the plugin's settings, and it does with vLLM's kernels"},
    Requirement{"VLLM-10",
                "speculative decoding with n-gram drafts is served: the padded admission of a request with one "
                "prompt token left after a hit (1 + num_speculative_tokens rows) is the core's admission padding "
                "(INV-12), and every resumed response equals its cold run where stock vLLM's differ; other "
                "speculative methods (a draft model, EAGLE) are refused at start by name"},
    Requirement{"LLAMA-1",
                "with pfx.integrations.llama_cpp.enable(llm) on a llama-cpp-python Llama, how much of each prompt it "
                "takes from its KV cache is pfx's core rule (the record: the last prompt's prefill; with flash "
                "attention off and n_ubatch dividing n_batch, chunk 1 and the prefill step n_ubatch, else the grid "
                "llama.cpp resumes exactly on, n_ubatch where it divides n_batch, else n_batch), and every "
                "response, tokens and logprobs, equals a cold run where stock Llama's differ; the rest of "
                "llama-cpp-python (sampling, grammars, chat formats, streaming, embeddings) is served as without pfx"},
    Requirement{"LLAMA-2",
                "the record of an enabled Llama follows every way its context changes: a reset, a failed or "
                "interrupted call, a prompt longer than the context, an embedding, rows or ids changed by hand, and "
                "a saved state loaded back (the prompt caches LlamaRAMCache and LlamaDiskCache included), which "
                "brings its record only into a context whose rows are computed the same way"},
    Requirement{"LLAMA-3",
                "enable refuses, with an error naming it and changing nothing, a bad chunk or keep_min (a chunk off "
                "the grid names both), a second enable on the same Llama, a llama-cpp-python version it was not "
                "tested with, and what it cannot vouch for: an overridden method, a recurrent, hybrid or "
                "sliding-window model, a multimodal chat handler, layers offloaded to a GPU"},
    Requirement{"LLAMA-4",
                "python -m pfx.integrations.llama_cpp.server is llama-cpp-python's OpenAI-compatible server, taking "
                "its arguments and settings file, with pfx's rule on for every model it loads: through the openai "
                "client each resumed chat turn equals its cold run where the stock server's differ, each decision "
                "is logged, and a setting the rule cannot take stops it naming the setting"},
    Requirement{"LLAMA-5",
                "llama.cpp's llama-server built by scripts/llama.sh --server with --pfx takes each slot's reuse, what "
                "the host prompt cache offers and slot selection from pfx's core (the record: the last prompt's "
                "prefill; the chunk and prefill step as LLAMA-1 resolves them from the context's parameters): "
                "through the openai client every resumed response, streamed, stopped or after a client that "
                "disconnected, on one slot or two, equals its cold run where stock llama-server's differ, keeping at "
                "least half of stock's reuse; --cache-reuse, speculative decoding, sliding-window, recurrent and "
                "multimodal models and LoRA adapters stop the start by name"},
    Requirement{"LLAMA-6",
                "llama-server --pfx --pfx-certificate FILE, FILE written by pfx conform --engine llama --certify on "
                "the same configuration (ggml's version, its CPU paths, the model's bytes, n_batch, n_ubatch, flash "
                "attention, the KV type, the threads), also reuses the rows decode wrote (Config::decode_rows_exact), "
                "and only where the certificate's own report proves them equal to a cold prefill's (200 resumes "
                "from them, 100 decode steps rescored and 40 rows compared byte for byte, none differing, and "
                "batched requests answering as alone): through the openai client every resumed chat turn equals "
                "its cold run; a certificate of another configuration (each field named with both values), one "
                "changed after it was written or with a fact edited by hand, one that does not prove decode rows "
                "exact or the rule's chunk, stops the start naming why"},
    Requirement{"SERVE-1",
                "pfx.verify_server replays a workload through a running server, which it recognises (vLLM's "
                "OpenAI-compatible server, llama.cpp's llama-server, pfx's llama-cpp-python server), or a vllm.LLM, "
                "one request at a time or (a server) with --concurrency N requests in flight, and compares each "
                "response with a cold run of it served alone, made the server's own way (after a reset of vLLM's "
                "prefix cache, with cache_prompt false on llama-server and pfx's llama-cpp-python server, or from a "
                "second server without a cache), generated tokens and logprobs bit "
                "for bit; it reports the responses that differ with the first difference, the prompt tokens reused "
                "by the server's own count and the time to first token, with pfx's verdict words and exit statuses; "
                "it passes only when a response resumed from the cache was compared and none differs, and refuses "
                "by name a server it cannot check as asked (one it does not know, stock llama-cpp-python's, no reset "
                "endpoint, no reused-token counts) and bad input"},
    Requirement{"SERVE-2",
                "vLLM's OpenAI-compatible server started with PFX_VLLM=1 answers every resumed turn of a chat sent "
                "through chat completions by the openai client as its cold run, tokens and logprobs, keeping at "
                "least half of stock vLLM's reuse, where stock vLLM's answers differ"},
};

}  // namespace pfx::spec
