"""Removal of harmful content: URL block lists (before extraction), bad-word density and a toxicity
classifier (after language ID). The lists they use ship in `lists/` (licences and origin in
lists/SOURCES.md)."""
