"""`python -m roofline.measure peaks|ops|comm ...` (also: torchrun ... -m roofline.measure comm)."""

import sys

from .cli import main

sys.exit(main())
