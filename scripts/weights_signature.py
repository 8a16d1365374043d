"""Record the signature (tensor names, shapes, dtypes, tied names) of a model's weights as the launcher ships it.

    python3 -m scripts.weights_signature HEADER_OR_SAFETENSORS OUT      # from the repository root

The input is a `model.safetensors` saved by openpi's trainer (only its 8-byte length and JSON header are read, so a
copy of just those first bytes works too) or that header's JSON. OUT is a gzipped JSON signature, for the launcher:
`entrypoint/inspect/data/pi05.signature.json.gz` (the check picks a signature by the model it describes: pi0 or
pi05, the two widths and the action dimension, read from the header itself). Written deterministically, so the same
header gives the same bytes.
"""

from __future__ import annotations

import argparse
import gzip
import json
import struct
import sys
from pathlib import Path

from entrypoint.inspect.assets import SAFETENSORS_HEADER_LIMIT
from entrypoint.inspect.weights import parse_signature, signature_of


def read_header(path: Path) -> dict[str, object]:
    """The header of a safetensors file (or of its first 8 + N bytes), or a header JSON file; SystemExit if neither."""
    if not path.is_file():
        raise SystemExit(f"{path}: not a regular file")
    with path.open("rb") as handle:
        head = handle.read(8)
        if head.lstrip()[:1] == b"{":
            data = head + handle.read(SAFETENSORS_HEADER_LIMIT)
        elif len(head) == 8 and 0 < (length := struct.unpack("<Q", head)[0]) <= SAFETENSORS_HEADER_LIMIT:
            data = handle.read(length)
        else:
            raise SystemExit(f"{path}: neither a safetensors file nor its header JSON")
    try:
        header = json.loads(data)
    except ValueError as exc:
        raise SystemExit(f"{path}: the header is not JSON ({exc})") from None
    if not isinstance(header, dict):
        raise SystemExit(f"{path}: the header is not a JSON object")
    return header


def signature_bytes(header: dict[str, object]) -> bytes:
    """The gzipped signature of `header` (SystemExit when it is not a pi0-family model's)."""
    try:
        signature = signature_of(header)
    except ValueError as exc:
        raise SystemExit(f"not a model the launcher knows: {exc}") from None
    text = json.dumps(signature.to_json(), separators=(",", ":"), sort_keys=True).encode()
    return gzip.compress(text, compresslevel=9, mtime=0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("source", type=Path, help="model.safetensors, its first bytes, or its header JSON")
    parser.add_argument("out", type=Path, help="the signature to write (…/<name>.signature.json.gz)")
    args = parser.parse_args(argv)
    data = signature_bytes(read_header(args.source))
    signature = parse_signature(data)  # what the launcher will read back
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_bytes(data)
    print(
        f"{args.out}: {signature.model.label().en}; {len(signature.tensors)} tensors, {len(signature.tied)} tied "
        f"names; {len(data)} bytes"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
