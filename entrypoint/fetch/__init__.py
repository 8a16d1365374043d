"""The fetch-assets command: manifest, resumable download, streaming unpack and verification of the openpi-assets tree."""
