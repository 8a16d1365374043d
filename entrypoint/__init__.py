"""vla-entrypoint: a verified, explained torchrun launch of openpi training on TI-ONE."""

__version__ = "0.1.0"
