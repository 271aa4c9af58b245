import sys

from nagkit.cli.main import main

sys.exit(main())
