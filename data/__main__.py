"""Entry point of `make data`: not built yet."""

import sys

sys.exit("make: this verb is not built yet (see the open issues)")
