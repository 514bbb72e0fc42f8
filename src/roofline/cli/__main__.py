"""`python -m roofline.cli` is the `roofline` command."""

import sys

from . import main

sys.exit(main())
