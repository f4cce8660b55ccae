"""``python -m ct_controllers.setup_assistant URDF -o DIR ...``: the ``ct-setup`` command."""

import sys

from ct_controllers.setup_assistant.cli import main

if __name__ == "__main__":  # importing the module (e.g. to list the package's errors) runs nothing
    sys.exit(main())
