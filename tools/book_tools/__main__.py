"""``python -m book_tools``: see book_tools.cli."""

import sys

from book_tools.cli import main

sys.exit(main())
