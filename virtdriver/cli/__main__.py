"""``python -m virtdriver.cli``: the ``virtdriver`` command."""

import sys

from virtdriver.cli.main import main

sys.exit(main())
