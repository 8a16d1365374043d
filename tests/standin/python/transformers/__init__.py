"""A tiny stand-in for the `transformers` package (stand-in base image only).

It exists so that openpi's `install_transformers_replace.sh` has an installed package to patch and
`import transformers` works; the version is the one openpi pins.
"""

__version__ = "4.53.2"
