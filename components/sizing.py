"""`python -m components.sizing`: the documented name of `planner.sizing_cli`, kept so users' commands still work."""

import sys

from planner.sizing_cli import main

if __name__ == "__main__":
    sys.exit(main())
