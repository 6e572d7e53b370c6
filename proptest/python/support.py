"""What the Python tests share: the requirement IDs a test verifies, the random seed, the seed's
module loaded under a given environment, and an environment set for the length of a test."""
from __future__ import annotations

import contextlib
import importlib
import os
import random
import sys

# One seed per run, printed by run_tests.py; PFX_PY_SEED=<n> replays a run.
SEED = int(os.environ.get("PFX_PY_SEED") or random.SystemRandom().randrange(2**32))

VARIABLES = ("TF_GLM53_PREFIX_CACHE", "TF_GLM53_PREFIX_CACHE_MIN")


def verifies(ids: str):
    """Records the requirement IDs (docs/traceability.md) that the test verifies."""
    def mark(test):
        test.verifies = ids
        return test
    return mark


def rng(test) -> random.Random:
    """A generator for one test, from the run's seed and the test's name, so that a test replays the
    same cases whatever else runs."""
    return random.Random(f"{SEED}:{test.id()}")


@contextlib.contextmanager
def environment(**values):
    """The two variables set to `values` (None or absent: unset) for the block, restored after."""
    saved = {name: os.environ.get(name) for name in VARIABLES}
    try:
        for name in VARIABLES:
            value = values.get(name)
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def fresh_seed_module():
    """The seed's module (pfx.fixtures.original_prompt_prefix), executed now: like the seed, it reads the
    environment at import."""
    from pfx.fixtures import load_original
    return load_original()


def fresh_pfx():
    """pfx with its module attributes read again from the environment, as a fresh import would."""
    import pfx
    return importlib.reload(pfx)


def state(prefix) -> tuple:
    """What a PromptPrefix (ours or the seed's) shows."""
    return (list(prefix.ids), prefix.canonical_end, prefix.enabled)


def why_not_llama(*modules: str, install: str = "") -> str:
    """Why a llama-cpp-python suite cannot run here, or "": llama_cpp, or one of `modules` (`install`
    says how to get them), cannot be found, or no model is named by PFX_LLAMA_MODEL."""
    import importlib.util

    if importlib.util.find_spec("llama_cpp") is None:
        return "llama-cpp-python is not installed; scripts/llama.sh --python installs it"
    missing = [name for name in modules if importlib.util.find_spec(name) is None]
    if missing:
        return f"{', '.join(missing)} not installed: {install}"
    if not os.environ.get("PFX_LLAMA_MODEL"):
        return ("no model: PFX_LLAMA_MODEL names the GGUF file pfx.fixtures.tiny_gguf writes, which the build's "
                "fixture writes where llama.cpp was found (scripts/llama.sh)")
    return ""


def check(condition: bool, message: str) -> None:
    if not condition:
        raise AssertionError(message)


sys.dont_write_bytecode = True  # no __pycache__ beside the tests
