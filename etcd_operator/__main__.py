import sys

from etcd_operator.cli import main

sys.exit(main())
