"""``python -m ct_controllers.setup_assistant URDF -o DIR ...``: the ``ct-setup`` command."""

import sys

from ct_controllers.setup_assistant.cli import main

sys.exit(main())
