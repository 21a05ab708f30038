"""`python -m components.loadtest`: the documented name of `endpoint_tools.loadtest`, kept so users' commands still
work."""

import sys

from endpoint_tools.loadtest import main

if __name__ == "__main__":
    sys.exit(main())
