import sys

from restore_operator.cli import main

sys.exit(main())
