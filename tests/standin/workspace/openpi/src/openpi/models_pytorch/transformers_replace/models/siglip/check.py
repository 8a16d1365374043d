"""Present only once openpi's transformers patch is copied in (stand-in of openpi's file of this name)."""

import transformers


def check_whether_transformers_replace_is_installed_correctly() -> bool:
    """True when the patched package is the transformers version openpi's patch was written for."""
    return transformers.__version__ == "4.53.2"
