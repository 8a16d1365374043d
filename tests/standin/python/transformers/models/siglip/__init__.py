"""Stand-in: the SigLIP model family, the one openpi's patch adds `check.py` to."""
