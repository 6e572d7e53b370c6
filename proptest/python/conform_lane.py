"""A lane in Python for engines of pfx's Python engine protocol (docs/python.md, "Checking an
engine"): a KV state as a writable float32 buffer, prefill on the engine's chunk grid, a multi-turn
replay through pfx.Machine compared with cold runs bit for bit, and the replay of a mismatch that
pfx.conform names. It shares no code with the check it verifies."""
from __future__ import annotations

import array
import random
import struct

import pfx


def new_kv(engine, capacity: int) -> memoryview:
    """A KV state of `capacity` rows, NaN everywhere (as pfx's host state starts)."""
    floats = array.array("f", [float("nan")]) * (engine.layers * 2 * capacity * engine.width)
    return memoryview(floats).cast("B").cast("f", [engine.layers, 2, capacity, engine.width])


def rows(engine, kv: memoryview, n: int) -> list:
    """Rows [0, n) of every layer's keys and values, as bytes per (layer, plane)."""
    data = kv.tobytes()
    capacity = kv.shape[2]
    row_bytes = engine.width * 4
    out = []
    for layer in range(engine.layers):
        for plane in range(2):
            begin = (layer * 2 + plane) * capacity * row_bytes
            out.append(data[begin:begin + n * row_bytes])
    return out


def logit_bits(logits) -> bytes:
    values = logits.tolist() if hasattr(logits, "tolist") else list(logits)
    return struct.pack(f"{len(values)}f", *values)


def prefill_on_grid(engine, kv: memoryview, prompt, start: int, chunk: int) -> bytes:
    """prompt[start:] in chunks that end at multiples of `chunk` (or the prompt's end); the last
    row's logits, as float32 bytes."""
    logits = None
    begin = start
    while begin < len(prompt):
        end = min((begin // chunk + 1) * chunk, len(prompt))
        logits = engine.prefill(list(prompt[begin:end]), begin, kv)
        begin = end
    return logit_bits(logits)


def first_row_difference(engine, got: list, expected: list, n: int):
    """(row, layer, plane, column, got, expected) of the lowest row that differs, or None."""
    row_bytes = engine.width * 4
    for row in range(n):
        for index in range(engine.layers * 2):
            a = got[index][row * row_bytes:(row + 1) * row_bytes]
            b = expected[index][row * row_bytes:(row + 1) * row_bytes]
            if a != b:
                for column in range(engine.width):
                    x = a[column * 4:(column + 1) * 4]
                    y = b[column * 4:(column + 1) * 4]
                    if x != y:
                        return (row, index // 2, "key" if index % 2 == 0 else "value", column,
                                struct.unpack("f", x)[0], struct.unpack("f", y)[0])
    return None


def cold(engine, prompt, capacity: int):
    kv = new_kv(engine, capacity)
    logits = prefill_on_grid(engine, kv, prompt, 0, engine.chunk)
    return rows(engine, kv, len(prompt)), logits


def workload(random_: random.Random, vocab: int, turns: int, longest: int) -> list:
    """Multi-turn conversations: each turn extends the last prompt by a few tokens; now and then a new
    conversation starts, or an earlier turn is branched from (a shorter shared prefix)."""
    prompts = []
    prompt = [random_.randrange(vocab) for _ in range(random_.randint(1, 12))]
    for _ in range(turns):
        prompts.append(list(prompt))
        choice = random_.random()
        if choice < 0.15 or len(prompt) > longest - 16:
            prompt = [random_.randrange(vocab) for _ in range(random_.randint(1, 12))]
        elif choice < 0.3:
            prompt = prompt[:random_.randint(1, len(prompt))] + [random_.randrange(vocab)
                                                                 for _ in range(random_.randint(1, 9))]
        else:
            prompt = prompt + [random_.randrange(vocab) for _ in range(random_.randint(1, 13))]
    return prompts


def replay(engine, rule_chunk: int, prompts: list, capacity: int) -> dict:
    """Serves every prompt through a pfx.Machine (rule chunk `rule_chunk`, keep_min 0) on one KV
    state, prefilling on the engine's grid from the offset the rule grants, and compares each with a
    cold run: rows [0, n) and logits, bit for bit."""
    machine = pfx.Machine()
    machine.configure(pfx.Config(enabled=True, keep_min=0, chunk=rule_chunk))
    kv = new_kv(engine, capacity)
    mismatches, reused, offsets = 0, 0, set()
    for prompt in prompts:
        decision = machine.query(prompt)
        machine.begin(prompt, decision.offset)
        logits = prefill_on_grid(engine, kv, prompt, decision.offset, engine.chunk)
        machine.commit(prompt, len(prompt))
        reused += decision.offset
        offsets.add(decision.offset)
        cold_rows, cold_logits = cold(engine, prompt, capacity)
        if rows(engine, kv, len(prompt)) != cold_rows or logits != cold_logits:
            mismatches += 1
    return {"mismatches": mismatches, "reused": reused, "offsets": offsets}


def reproduce(engine, mismatch, capacity: int):
    """Replays what pfx.conform says differs: a cold run of mismatch.held, then the prompt from the
    offset on the engine's grid; returns (row difference or None, resumed logits, cold logits)."""
    kv = new_kv(engine, capacity)
    prefill_on_grid(engine, kv, mismatch.held, 0, engine.chunk)
    logits = prefill_on_grid(engine, kv, mismatch.prompt, mismatch.offset, engine.chunk)
    cold_rows, cold_logits = cold(engine, mismatch.prompt, capacity)
    n = len(mismatch.prompt)
    return first_row_difference(engine, rows(engine, kv, n), cold_rows, n), logits, cold_logits
