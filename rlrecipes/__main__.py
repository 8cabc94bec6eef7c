from rlrecipes.cli import main

raise SystemExit(main())
