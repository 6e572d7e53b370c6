"""Multi-turn chat workloads of token ids, for trying pfx on an engine without traffic of one's own:
the vLLM suites and the vLLM benchmark serve them (docs/engines.md, "vLLM"). Turns hold earlier
responses; edits change a token of the history; regenerations repeat the last prompt; new sessions
start from a shared system prompt; shorter prompts cut the held one: every way a prompt can share,
or stop sharing, rows with what a cache holds."""
from __future__ import annotations

import dataclasses
import random


@dataclasses.dataclass(frozen=True)
class Step:
    kind: str     # "turn", "regenerate", "edit", "new session", "shorter"
    prompt: tuple


def chat_workload(r: random.Random, vocab: int = 512):
    """A generator of prompts for a multi-turn workload drawn from `r`: each call takes the last
    response (a sequence of token ids) and gives the next Step."""
    system = [r.randrange(vocab) for _ in range(r.randrange(20, 80))]
    state = {"prompt": None}

    def fresh(n):
        return [r.randrange(vocab) for _ in range(n)]

    def next_step(last_response) -> Step:
        prompt = state["prompt"]
        if prompt is None:
            step = Step("new session", tuple(system + fresh(r.randrange(5, 60))))
        else:
            kind = r.choices(["turn", "regenerate", "edit", "new session", "shorter"], [6, 1, 1, 1, 1])[0]
            if kind == "turn":
                step = Step(kind, tuple(list(prompt) + list(last_response) + fresh(r.randrange(1, 70))))
            elif kind == "regenerate":
                step = Step(kind, prompt)
            elif kind == "edit":
                edited = list(prompt)
                edited[r.randrange(len(edited))] = r.randrange(vocab)
                step = Step(kind, tuple(edited + fresh(r.randrange(1, 20))))
            elif kind == "new session":
                step = Step(kind, tuple(system + fresh(r.randrange(5, 60))))
            else:
                step = Step(kind, tuple(prompt[:r.randrange(2, len(prompt) + 1)]))
        state["prompt"] = step.prompt
        return step

    return next_step
