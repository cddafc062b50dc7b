"""A digest of a Bloom filter's BF.SCANDUMP stream that does not depend on
how the stream was cut into chunks.

BF.SCANDUMP leaves out ranges it knows to be zero, and which ranges it knows
depends on the filter's history, not only on its bits: a region an add had
marked before its bit was set, or whose counters a BF.DEL brought back to
zero, is dumped as zeros by one server and left out by another that loaded
the same bytes. Both streams describe the same bits (a byte no chunk holds
is zero), so the digest covers the header, then every maximal run of
non-zero bytes with its offset, and nothing else. A chunk of bloomery's
format ends with a checksum of its own bytes (proto/resp.md), which differs
with the cut: it is left out (the server checked it when it loaded).
"""

import hashlib
import re

_NON_ZERO = re.compile(rb"[^\x00]+")
_BLOOMERY_HEADER = b"BLMDUMP1"
_CHUNK_CHECKSUM_BYTES = 8


class ScandumpDigest:
    def __init__(self):
        self._hash = hashlib.sha256()
        self._header_seen = False
        self._checksummed = False
        # A run that reached the end of the last chunk: the next chunk may
        # carry it on.
        self._run_start = None
        self._run = bytearray()

    def add(self, iterator, data):
        """One [iterator, data] reply of BF.SCANDUMP (not the final [0, ""])."""
        if not self._header_seen:
            self._header_seen = True
            self._checksummed = data.startswith(_BLOOMERY_HEADER)
            self._hash.update(b"header %d:" % len(data) + data)
            return
        if self._checksummed:
            data = data[:-_CHUNK_CHECKSUM_BYTES]
        # The chunk ends at byte iterator - 1 of the sub-filters' arrays.
        start = iterator - 1 - len(data)
        if self._run_start is not None and start != self._run_start + len(self._run):
            self._close_run()
        for match in _NON_ZERO.finditer(data):
            if self._run_start is not None:
                if match.start() == 0:
                    self._run += match.group()
                    if match.end() == len(data):
                        return
                    self._close_run()
                    continue
                self._close_run()
            if match.end() == len(data):
                self._run_start, self._run = start + match.start(), bytearray(match.group())
            else:
                self._hash.update(b"%d %d:" % (start + match.start(), len(match.group())))
                self._hash.update(match.group())

    def digest(self):
        self._close_run()
        return self._hash.digest()

    def _close_run(self):
        if self._run_start is not None:
            self._hash.update(b"%d %d:" % (self._run_start, len(self._run)))
            self._hash.update(bytes(self._run))
            self._run_start, self._run = None, bytearray()
