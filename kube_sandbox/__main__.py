import sys

from kube_sandbox.cli import main

sys.exit(main())
