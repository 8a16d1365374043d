#!/bin/bash
# Stand-in for the vendor base image's install_transformers_replace.sh: copy openpi's replacement files over
# the installed transformers package (idempotent), as openpi's README says to do.
set -euo pipefail
src="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/src/openpi/models_pytorch/transformers_replace"
dest=$(python -c 'import os, transformers; print(os.path.dirname(transformers.__file__))')
cp -r "$src"/. "$dest"/
echo "transformers_replace applied -> $dest"
