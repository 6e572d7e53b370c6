"""The old name of ``pfx.fixtures.tiny_llama`` (a small Hugging Face Llama with random weights), kept so
that code written against it still runs: the fixture lives there now, with the others, apart from the
adapters. This name gives the same objects, and warns (DeprecationWarning) when imported."""
import sys
import warnings

from ..fixtures import tiny_llama as _fixture
from ..fixtures.tiny_llama import *  # noqa: F401,F403  every public name, the same object

warnings.warn("pfx.integrations.tiny_llama is now pfx.fixtures.tiny_llama", DeprecationWarning, stacklevel=2)
if __name__ == "__main__":  # python -m pfx.integrations.tiny_llama, as before the move
    sys.exit(_fixture.main())
