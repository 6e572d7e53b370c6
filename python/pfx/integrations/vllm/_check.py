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
    finding and for resumes batched, serve_joining() for resumes joining another mid-decode)."""

    counter = "num_cached_tokens"
    _joined = 0  # pairs served by serve_joining(), which name their requests apart

    def __init__(self, llm):
        self.llm = llm

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
        from vllm.inputs import TokensPrompt
        engine = self.llm.llm_engine
        Engine._joined += 1
        names = (f"pfx-joining-{Engine._joined}-first", f"pfx-joining-{Engine._joined}-second")

        def add(name, prompt):
            self._call(lambda params: engine.add_request(name, TokensPrompt(prompt_token_ids=list(prompt)), params),
                       max_tokens, detokenize=False)

        add(names[0], first)
        done = {}
        steps = 0
        while len(done) < 2:
            if steps == after_steps:
                if names[0] in done:
                    raise CheckError(f"vLLM finished the first request in {steps} steps, before the second joined "
                                     f"it after {after_steps}")
                add(names[1], second)
            for out in engine.step():
                if out.finished:
                    done[out.request_id] = self._served(out)
            steps += 1
            if steps > after_steps and not engine.has_unfinished_requests() and len(done) < 2:
                raise CheckError(f"vLLM finished {sorted(done)} only")
        return done[names[0]], done[names[1]]

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
