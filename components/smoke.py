"""`python -m components.smoke`: the documented name of `endpoint_tools.smoke`, kept so users' commands still work."""

import sys

from endpoint_tools.smoke import main

if __name__ == "__main__":
    sys.exit(main())
