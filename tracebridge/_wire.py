"""Protobuf's base-128 varint, encoded one value at a time: for the writers' encoder
(writers/protowire.py) and for the reader that frames parts of an XSpace anew
(readers/xspace_windows.py), rooms that may not import each other."""

from __future__ import annotations


def varint_bytes(value: int) -> bytes:
    """``value`` as a varint; a negative one as its 64-bit two's complement, as protobuf
    writes a negative int64."""
    if value < 0:
        value += 1 << 64
    out = bytearray()
    while True:
        low = value & 0x7F
        value >>= 7
        if value:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)
