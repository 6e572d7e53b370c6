"""The old name of ``pfx.fixtures.tiny_gguf`` (a small llama GGUF model with random weights), kept so
that code written against it still runs: the fixture lives there now, with the others, apart from the
adapters. This name gives the same objects, and warns (DeprecationWarning) when imported."""
import sys
import warnings

from ..fixtures import tiny_gguf as _fixture
from ..fixtures.tiny_gguf import *  # noqa: F401,F403  every public name, the same object

warnings.warn("pfx.integrations.tiny_gguf is now pfx.fixtures.tiny_gguf", DeprecationWarning, stacklevel=2)
if __name__ == "__main__":  # python -m pfx.integrations.tiny_gguf, as before the move
    sys.exit(_fixture.main())
