"""``python -m service``: the ``crawlsched`` command without its console script."""

import sys

from service.cli import main

sys.exit(main())
