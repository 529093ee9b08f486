"""The soak: `python -m bench.soak` (bench/soak/run.py)."""
from .run import main

main()
