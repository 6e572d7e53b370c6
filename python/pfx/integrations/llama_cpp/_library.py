"""llama-cpp-python as the llama.cpp integration loads it (private): imported only when used, so that
pfx works without it, and checked against the versions pfx was tested with."""
from __future__ import annotations

TESTED_VERSIONS = ("0.3.36",)  # llama-cpp-python: scripts/llama.sh --python installs it


def load(who: str):
    """The llama_cpp module; ImportError saying `who` needs it, and how to install it, where it does not
    import (FileNotFoundError, an OSError: the package without its library)."""
    try:
        import llama_cpp  # noqa: PLC0415  (imported when used: pfx works without it)
    except (ImportError, OSError, RuntimeError) as e:
        raise ImportError(f"{who} needs llama-cpp-python, which does not import here ({type(e).__name__}: {e}); "
                          f"scripts/llama.sh --python installs it with its library") from e
    return llama_cpp


def untested(llama_cpp) -> str:
    """Why pfx does not vouch for this llama-cpp-python, or "": a version it was not tested with."""
    version = getattr(llama_cpp, "__version__", "unknown")
    if version in TESTED_VERSIONS:
        return ""
    return f"pfx's rule was tested with llama-cpp-python {', '.join(TESTED_VERSIONS)}, and this is {version}"
