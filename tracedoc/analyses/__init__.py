"""Analyses: measure, never judge. Documented SQL modules over the store; see modules.py for the loader."""
