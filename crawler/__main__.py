"""Entry point of `make crawler`: not built yet."""

import sys

sys.exit("make: this verb is not built yet (see the open issues)")
