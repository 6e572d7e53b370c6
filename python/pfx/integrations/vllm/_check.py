"""What pfx's two checks of vLLM share (``pfx.integrations.vllm.conform``, the check of a configuration
through vLLM's cache, and ``pfx.verify_server``, the check of a server a user runs, or of vLLM in this
process): vLLM in this process. What a served request returned, its comparison with a cold run and
the two errors that are not a verdict are the server check's (``pfx.verify_server``).

Private: users import the two checks, whose names this module's are re-exported under."""
from __future__ import annotations

from typing import Sequence

from ...verify_server.compare import Served, first_difference, same_bits
from ...verify_server.errors import BadInput, CheckError

__all__ = ["BadInput", "CheckError", "Engine", "Served", "chosen_logprobs", "first_difference", "same_bits", "start"]


def chosen_logprobs(completion) -> tuple:
    """The logprob vLLM gave each token it generated in `completion` (a CompletionOutput asked for
    logprobs), in order: what a check compares bit for bit beside the tokens."""
    return tuple(step[token].logprob for step, token in zip(completion.logprobs, completion.token_ids))


def start(model: str, **engine_args):
    """A vllm.LLM for a check: `model` with prefix caching on, seed 0 and request stats kept (the time to
    first token); `engine_args` go to vllm.LLM as they are, over these."""
    import vllm
    arguments = dict(model=model, enable_prefix_caching=True, seed=0, disable_log_stats=False)
    arguments.update(engine_args)
    return vllm.LLM(**arguments)


class Engine:
    """A vllm.LLM in this process as the checks drive it: token-id prompts (alone, or several in one
    batch) and chats served greedily, `max_tokens` tokens whatever the end-of-sequence token, with the
    chosen token's logprob; vLLM's num_cached_tokens is the reused-token count, and the request's
    first_token_latency its time to first token (kept where the engine keeps request stats: start()).
    A test can stand another object with serve() and reset() in (serve_batch() for the batching
    finding and for resumes batched, serve_joining() for resumes joining another mid-decode,
    serve_reading_rows() for the K and V rows compared byte for byte)."""

    counter = "num_cached_tokens"
    _named = 0  # requests added to vLLM's engine by name (serve_joining(), serve_reading_rows()), kept apart

    def __init__(self, llm):
        self.llm = llm
        self._read = {}  # request name: its blocks' bytes, read as vLLM freed them (serve_reading_rows())

    def serve(self, prompt: Sequence[int], max_tokens: int) -> Served:
        return self.serve_batch([prompt], max_tokens)[0]

    def serve_batch(self, prompts: Sequence[Sequence[int]], max_tokens: int) -> list:
        """`prompts` served in one call, as vLLM batches them, each as serve() serves one."""
        from vllm.inputs import TokensPrompt
        outputs = self._call(lambda params: self.llm.generate(
            [TokensPrompt(prompt_token_ids=list(prompt)) for prompt in prompts], params, use_tqdm=False),
            max_tokens, detokenize=False)
        return [self._served(out) for out in outputs]

    def serve_joining(self, first: Sequence[int], second: Sequence[int], after_steps: int, max_tokens: int) -> tuple:
        """`first` served, and `second` added to vLLM's engine after `after_steps` of its steps (1 step: first's
        prefill, if it takes one), so that second joins while first prefills or decodes; each served as
        serve() serves one: (first's Served, second's Served). CheckError where vLLM finished first before
        second was added (no joining)."""
        engine = self.llm.llm_engine
        names = (self._name("joining-first"), self._name("joining-second"))
        self._add(names[0], first, max_tokens)
        done = {}
        steps = 0
        while len(done) < 2:
            if steps == after_steps:
                if names[0] in done:
                    raise CheckError(f"vLLM finished the first request in {steps} steps, before the second joined "
                                     f"it after {after_steps}")
                self._add(names[1], second, max_tokens)
            done.update(self._finished(engine.step()))
            steps += 1
            if steps > after_steps and not engine.has_unfinished_requests() and len(done) < 2:
                raise CheckError(f"vLLM finished {sorted(done)} only")
        return done[names[0]], done[names[1]]

    def serve_reading_rows(self, prompt: Sequence[int], max_tokens: int) -> tuple:
        """`prompt` served alone, as serve() serves it, and the K and V rows vLLM held for it when it
        finished: (Served, {attention layer's name: [the bytes of each block the request held, in the
        order of its positions]}), read from vLLM's KV cache as the request's blocks were freed, before
        anything else could write them. The bytes are the cache's own, whatever its layout: a block holds
        `block size` rows of each of the layer's KV heads. CheckError where vLLM runs its engine in another
        process (VLLM_ENABLE_V1_MULTIPROCESSING=1), whose cache this process cannot read."""
        engine = self.llm.llm_engine
        self._reading_rows()
        name = self._name("read")
        self._read[name] = None
        self._add(name, prompt, max_tokens)
        done = {}
        while name not in done and engine.has_unfinished_requests():
            done.update(self._finished(engine.step()))
        rows = self._read.pop(name)
        if name not in done or rows is None:
            raise CheckError(f"vLLM did not finish the request whose rows were to be read ({name})")
        return done[name], rows

    def _reading_rows(self) -> None:
        """Has vLLM's KV cache manager hand this engine the bytes of a request of serve_reading_rows() as it
        frees the request's blocks (once an engine)."""
        core = getattr(self.llm.llm_engine.engine_core, "engine_core", None)
        if core is None:
            raise CheckError("vLLM's KV cache is in another process (its engine core runs apart: "
                             "VLLM_ENABLE_V1_MULTIPROCESSING=1), and its rows cannot be read from this one; "
                             "VLLM_ENABLE_V1_MULTIPROCESSING=0 runs it in this process")
        manager = core.scheduler.kv_cache_manager
        if getattr(manager, "_pfx_reads", None) is self._read:
            return
        import torch
        layers = core.vllm_config.compilation_config.static_forward_context
        groups = [group.layer_names for group in manager.kv_cache_config.kv_cache_groups]
        free = manager.free

        def reading_free(request):
            # vLLM names a request by the name it was given, and a suffix of its own.
            name = request.request_id if request.request_id in self._read else request.request_id.rsplit("-", 1)[0]
            if name in self._read:
                blocks = manager.get_block_ids(request.request_id)
                self._read[name] = {layer: [bytes(layers[layer].kv_cache[block].contiguous().view(-1).view(
                    torch.uint8).numpy()) for block in blocks[group]]
                    for group, names in enumerate(groups) for layer in names}
            return free(request)

        manager.free = reading_free
        manager._pfx_reads = self._read

    def _name(self, what: str) -> str:
        Engine._named += 1
        return f"pfx-{what}-{Engine._named}"

    def _add(self, name: str, prompt: Sequence[int], max_tokens: int) -> None:
        """`prompt` added to vLLM's engine as `name`, served as serve() serves one."""
        from vllm.inputs import TokensPrompt
        self._call(lambda params: self.llm.llm_engine.add_request(name, TokensPrompt(prompt_token_ids=list(prompt)),
                                                                  params), max_tokens, detokenize=False)

    def _finished(self, outputs) -> dict:
        """What a step of vLLM's engine finished: {request name: Served}."""
        return {out.request_id: self._served(out) for out in outputs if out.finished}

    def rescore(self, prompt: Sequence[int]) -> tuple:
        """`prompt` prefilled, cold (the prefix cache reset first), and rescored: the logprob vLLM gives each
        of its tokens from the rows before it (vLLM's prompt logprobs; None for the first, which has no
        row before it)."""
        from vllm.inputs import TokensPrompt
        self.reset()
        out = self._call(lambda params: self.llm.generate([TokensPrompt(prompt_token_ids=list(prompt))], params,
                                                          use_tqdm=False), 1, detokenize=False, prompt_logprobs=0)[0]
        return tuple(None if step is None else step[token].logprob for step, token in zip(out.prompt_logprobs, prompt))

    def chat(self, messages: Sequence[dict], max_tokens: int) -> Served:
        """`messages` served through vLLM's chat template (the model's tokenizer), as chat() serves them."""
        return self._served(self._call(lambda params: self.llm.chat(list(messages), params, use_tqdm=False),
                                       max_tokens, detokenize=True)[0])

    def reset(self) -> None:
        """Empties the prefix cache, so that what is served next is a cold run; CheckError where vLLM says
        it did not."""
        if not self.llm.reset_prefix_cache():
            raise CheckError("vLLM did not reset its prefix cache: a cold run would not be cold")

    def no_counts(self) -> str:
        """Why a response without the reused-token count cannot be checked."""
        return "vLLM did not say how many prompt tokens it reused (num_cached_tokens)"

    def _call(self, call, max_tokens: int, detokenize: bool, **options):
        """call(params): greedy, `max_tokens` tokens whatever the end-of-sequence token, the chosen token's
        logprob, and `options` (vLLM's SamplingParams); a request vLLM refuses (too long, an id past the
        vocabulary) a BadInput."""
        import vllm
        from vllm.exceptions import VLLMClientError
        params = vllm.SamplingParams(max_tokens=max_tokens, temperature=0.0, logprobs=1, ignore_eos=True,
                                     detokenize=detokenize, **options)
        try:
            return call(params)
        except (ValueError, VLLMClientError) as error:
            raise BadInput(str(error)) from error

    @staticmethod
    def _served(out) -> Served:
        completion = out.outputs[0]
        latency = getattr(out.metrics, "first_token_latency", 0.0) or None
        return Served(tuple(completion.token_ids), chosen_logprobs(completion), out.num_cached_tokens or 0,
                      len(out.prompt_token_ids), latency, completion.text or "")
