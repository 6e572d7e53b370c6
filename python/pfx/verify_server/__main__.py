"""python -m pfx.verify_server: the check's command line (pfx.verify_server's docstring)."""
import sys

from .command import main

sys.exit(main())
