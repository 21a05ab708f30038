"""`python -m offline_plan --stack dev`: what `make plan` runs."""

import sys

from offline_plan.write import main

sys.exit(main())
