# SPDX-License-Identifier: Apache-2.0
"""The parts of a scripts/bench run, one module each (see benchlib)."""
