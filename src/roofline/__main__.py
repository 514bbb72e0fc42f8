"""`python -m roofline` is the `roofline` command."""

import sys

from .cli import main

sys.exit(main())
