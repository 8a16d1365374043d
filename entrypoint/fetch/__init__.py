"""The `fetch-assets` command: manifest, resumable download, streaming unpack, verification (see `command`)."""
