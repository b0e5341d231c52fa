import sys

from backup_operator.cli import main

sys.exit(main())
