"""The parts of a scripts/bench run, one module each (see benchlib)."""
