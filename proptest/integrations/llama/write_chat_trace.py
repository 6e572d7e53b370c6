#!/usr/bin/env python3
"""Writes a JSON Lines trace of multi-turn chats for `pfx replay --engine llama` (docs/cli.md).

Each chat starts with a prompt of 70 to 200 tokens; each later turn sends the previous prompt again
with 20 to 100 new tokens appended, and one turn in each chat is sent twice (a retry), so that a
rule that is not aligned to the engine's chunk resumes one token before a prompt's end. Tokens are
3 .. vocab - 1 (0, 1 and 2 are the written models' <unk>, <s> and </s>); the trace is deterministic
in --seed.

    write_chat_trace.py OUT.jsonl [--vocab 512] [--chats 3] [--turns 4] [--seed 5]
"""

from __future__ import annotations

import argparse
import json
import random


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out")
    parser.add_argument("--vocab", type=int, default=512)
    parser.add_argument("--chats", type=int, default=3)
    parser.add_argument("--turns", type=int, default=4)
    parser.add_argument("--seed", type=int, default=5)
    a = parser.parse_args()
    rng = random.Random(a.seed)
    lines = []
    for chat in range(a.chats):
        prompt = [rng.randrange(3, a.vocab) for _ in range(rng.randrange(70, 200))]
        retry = rng.randrange(a.turns)
        for turn in range(a.turns):
            request = json.dumps({"prompt": prompt, "max_new_tokens": 4, "label": f"chat {chat} turn {turn}"})
            lines.append(request)
            if turn == retry:
                lines.append(request)
            prompt = prompt + [rng.randrange(3, a.vocab) for _ in range(rng.randrange(20, 100))]
    with open(a.out, "w", encoding="utf-8") as out:
        out.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
