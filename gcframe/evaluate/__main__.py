"""python -m gcframe.evaluate: score finished runs' models again (gcframe/evaluate/rescore.py)."""
import sys

from gcframe.evaluate.rescore import main

sys.exit(main())
