import sys
from pathlib import Path

# Shared helpers (planner_synth) are imported by name; pytest runs with --import-mode=importlib.
sys.path.insert(0, str(Path(__file__).resolve().parent))
