"""The on-disk and on-the-wire formats, in Python, to read what the server
wrote and to craft input it must refuse: xxHash64, snapshots
(proto/snapshot.md) and BF.SCANDUMP / BF.LOADCHUNK headers (proto/resp.md).
"""

import struct

# ---------------------------------------------------------------------------
# xxHash64 (seed 0), pure Python, to craft files with valid checksums.

_P1 = 11400714785074694791
_P2 = 14029467366897019727
_P3 = 1609587929392839161
_P4 = 9650029242287828579
_P5 = 2870177450012600261
_M = (1 << 64) - 1


def _rotl(x, r):
    return ((x << r) | (x >> (64 - r))) & _M


def _round(acc, value):
    acc = (acc + value * _P2) & _M
    return (_rotl(acc, 31) * _P1) & _M


def _merge(acc, value):
    acc ^= _round(0, value)
    return (acc * _P1 + _P4) & _M


def xxh64(data, seed=0):
    n = len(data)
    i = 0
    if n >= 32:
        v1 = (seed + _P1 + _P2) & _M
        v2 = (seed + _P2) & _M
        v3 = seed
        v4 = (seed - _P1) & _M
        while i + 32 <= n:
            a, b, c, d = struct.unpack_from("<4Q", data, i)
            v1, v2, v3, v4 = _round(v1, a), _round(v2, b), _round(v3, c), _round(v4, d)
            i += 32
        h = (_rotl(v1, 1) + _rotl(v2, 7) + _rotl(v3, 12) + _rotl(v4, 18)) & _M
        for v in (v1, v2, v3, v4):
            h = _merge(h, v)
    else:
        h = (seed + _P5) & _M
    h = (h + n) & _M
    while i + 8 <= n:
        (k,) = struct.unpack_from("<Q", data, i)
        h ^= _round(0, k)
        h = (_rotl(h, 27) * _P1 + _P4) & _M
        i += 8
    if i + 4 <= n:
        (k,) = struct.unpack_from("<I", data, i)
        h ^= (k * _P1) & _M
        h = (_rotl(h, 23) * _P2 + _P3) & _M
        i += 4
    while i < n:
        h ^= (data[i] * _P5) & _M
        h = (_rotl(h, 11) * _P1) & _M
        i += 1
    h ^= h >> 33
    h = (h * _P2) & _M
    h ^= h >> 29
    h = (h * _P3) & _M
    h ^= h >> 32
    return h


# ---------------------------------------------------------------------------
# A small parser / builder of the snapshot format (proto/snapshot.md).

RUN_MIN_ZERO_GAP = 4       # zero words that end a run
RUN_CHUNK_WORDS = 1 << 17  # runs also end at every multiple of this


def decode_runs(data, p, bits):
    """A layer's runs (version 5, and DUMP payloads 0xBF02) at data[p:]:
    (the layer's bits // 8 bytes, every word, and the offset after them)."""
    num_words = bits // 64
    out = bytearray(num_words * 8)
    done = 0
    while done < num_words:
        zeros, count = struct.unpack_from("<QQ", data, p)
        assert zeros + count > 0 and done + zeros + count <= num_words, (zeros, count)
        p += 16
        done += zeros
        out[done * 8:(done + count) * 8] = data[p:p + count * 8]
        assert len(data[p:p + count * 8]) == count * 8, "runs truncated"
        p += count * 8
        done += count
    return bytes(out), p


def encode_runs(words):
    """A layer's words (bytes) as the runs the server writes."""
    num_words = len(words) // 8  # a partial word (a crafted bad layer) is left out
    values = struct.unpack_from("<%dQ" % num_words, words)
    out = b""
    done = 0
    i = 0
    while i < num_words:
        if values[i] == 0:
            i += 1
            continue
        chunk_end = min(num_words, (i // RUN_CHUNK_WORDS + 1) * RUN_CHUNK_WORDS)
        last = i
        j = i + 1
        while j < chunk_end and j - last <= RUN_MIN_ZERO_GAP:
            if values[j] != 0:
                last = j
            j += 1
        out += struct.pack("<QQ", i - done, last + 1 - i) + words[i * 8:(last + 1) * 8]
        done = i = last + 1
    if done < num_words:
        out += struct.pack("<QQ", num_words - done, 0)
    return out

def parse_snapshot(data):
    """Returns (header dict, [record dicts], end dict); raises on anything odd.
    Reads versions 1 (no layout), 2 (a layout byte per filter and layer), 3
    (the journal position in the header, a filter id per record) and 4 (a
    hash scheme byte per filter; RedisBloom-scheme filters carry their option
    word and each layer its bpe and n2; a filter whose tightening ratio is not
    0.5 has bit 1 of its option byte set and the ratio after the scheme
    fields) and 5 (a layer's words as runs: decoded, every word in `words`)."""
    assert data[:8] == b"BLOOMERY", data[:8]
    version, created = struct.unpack_from("<Iq", data, 8)
    assert version in (1, 2, 3, 4, 5), version
    journal_id = journal_offset = 0
    pos = 20
    if version >= 3:
        journal_id, journal_offset = struct.unpack_from("<QQ", data, 20)
        pos = 36
    records = []
    while data[pos] == 0x01:
        start = pos
        (key_len,) = struct.unpack_from("<I", data, pos + 1)
        key = data[pos + 5:pos + 5 + key_len]
        p = pos + 5 + key_len
        filter_id = 0
        scheme = rb_options = 0
        tightening = 0.5
        if version >= 4:
            (filter_id,) = struct.unpack_from("<Q", data, p + 8)
            expire, = struct.unpack_from("<q", data, p)
            error_rate, capacity, expansion, nonscaling, layout, scheme = \
                struct.unpack_from("<dQIBBB", data, p + 16)
            p += 39
            if scheme == 1:
                (rb_options,) = struct.unpack_from("<I", data, p)
                p += 4
            if nonscaling & 2:
                (tightening,) = struct.unpack_from("<d", data, p)
                p += 8
                nonscaling &= 1
            (layer_count,) = struct.unpack_from("<I", data, p)
            p += 4
        elif version >= 3:
            (filter_id,) = struct.unpack_from("<Q", data, p + 8)
            expire, = struct.unpack_from("<q", data, p)
            error_rate, capacity, expansion, nonscaling, layout, layer_count = \
                struct.unpack_from("<dQIBBI", data, p + 16)
            p += 42
        elif version >= 2:
            expire, error_rate, capacity, expansion, nonscaling, layout, layer_count = \
                struct.unpack_from("<qdQIBBI", data, p)
            p += 34
        else:
            expire, error_rate, capacity, expansion, nonscaling, layer_count = struct.unpack_from(
                "<qdQIBI", data, p)
            layout = 0
            p += 33
        layers = []
        for _ in range(layer_count):
            bpe = n2 = 0
            if scheme == 1:
                l_cap, l_err, bits, hashes, l_layout, bpe, n2, items = struct.unpack_from(
                    "<QdQIBdBQ", data, p)
                header_bytes = 46
            elif version >= 2:
                l_cap, l_err, bits, hashes, l_layout, items = struct.unpack_from("<QdQIBQ", data, p)
                header_bytes = 37
            else:
                l_cap, l_err, bits, hashes, items = struct.unpack_from("<QdQIQ", data, p)
                l_layout, header_bytes = 0, 36
            if version >= 5:
                words, end = decode_runs(data, p + header_bytes, bits)
            else:
                words = data[p + header_bytes:p + header_bytes + bits // 8]
                end = p + header_bytes + bits // 8
            layers.append(dict(capacity=l_cap, error_rate=l_err, bits=bits, hashes=hashes,
                               layout=l_layout, items=items, words=words, offset=p, bpe=bpe,
                               n2=n2, words_offset=p + header_bytes))
            p = end
        (checksum,) = struct.unpack_from("<Q", data, p)
        assert checksum == xxh64(data[start:p]), "record checksum (test parser)"
        p += 8
        records.append(dict(key=key, expire=expire, error_rate=error_rate, capacity=capacity,
                            expansion=expansion, nonscaling=nonscaling, layout=layout,
                            layers=layers, offset=start, end=p, type=1, id=filter_id,
                            scheme=scheme, rb_options=rb_options, tightening=tightening))
        pos = p
    assert data[pos] == 0xFF
    (count,) = struct.unpack_from("<Q", data, pos + 1)
    (file_checksum,) = struct.unpack_from("<Q", data, pos + 9)
    assert file_checksum == xxh64(data[:pos + 9]), "file checksum (test parser)"
    assert pos + 17 == len(data)
    return (dict(version=version, created=created, journal_id=journal_id,
                 journal_offset=journal_offset), records, dict(count=count, offset=pos))


def build_record(r, layer_count=None, version=4):
    body = bytes([r.get("type", 1)]) + struct.pack("<I", len(r["key"])) + r["key"]
    count = len(r["layers"]) if layer_count is None else layer_count
    scheme = r.get("scheme", 0) if version >= 4 else 0
    if version >= 4:
        tightening = r.get("tightening", 0.5)
        option_bits = r["nonscaling"] | (2 if tightening != 0.5 else 0)
        body += struct.pack("<qQdQIBBB", r["expire"], r.get("id", 0), r["error_rate"],
                            r["capacity"], r["expansion"], option_bits, r.get("layout", 0),
                            scheme)
        if scheme == 1:
            body += struct.pack("<I", r.get("rb_options", 0))
        if tightening != 0.5:
            body += struct.pack("<d", tightening)
        body += struct.pack("<I", count)
    elif version >= 3:
        body += struct.pack("<qQdQIBBI", r["expire"], r.get("id", 0), r["error_rate"],
                            r["capacity"], r["expansion"], r["nonscaling"], r.get("layout", 0),
                            count)
    elif version >= 2:
        body += struct.pack("<qdQIBBI", r["expire"], r["error_rate"], r["capacity"],
                            r["expansion"], r["nonscaling"], r.get("layout", 0), count)
    else:
        body += struct.pack("<qdQIBI", r["expire"], r["error_rate"], r["capacity"],
                            r["expansion"], r["nonscaling"], count)
    for layer in r["layers"]:
        if scheme == 1:
            body += struct.pack("<QdQIBdBQ", layer["capacity"], layer["error_rate"],
                                layer["bits"], layer["hashes"], layer.get("layout", 0),
                                layer["bpe"], layer["n2"], layer["items"])
        elif version >= 2:
            body += struct.pack("<QdQIBQ", layer["capacity"], layer["error_rate"], layer["bits"],
                                layer["hashes"], layer.get("layout", 0), layer["items"])
        else:
            body += struct.pack("<QdQIQ", layer["capacity"], layer["error_rate"], layer["bits"],
                                layer["hashes"], layer["items"])
        body += encode_runs(layer["words"]) if version >= 5 else layer["words"]
    return body + struct.pack("<Q", xxh64(body))


def build_snapshot(header, records, count=None, trailing=b"", end=True):
    out = b"BLOOMERY" + struct.pack("<Iq", header["version"], header["created"])
    if header["version"] >= 3:
        out += struct.pack("<QQ", header.get("journal_id", 0), header.get("journal_offset", 0))
    for r in records:
        out += build_record(r, version=header["version"])
    if not end:
        return out
    out += b"\xff" + struct.pack("<Q", len(records) if count is None else count)
    out += struct.pack("<Q", xxh64(out))
    return out + trailing


# ---------------------------------------------------------------------------
# BF.SCANDUMP / BF.LOADCHUNK header (proto/resp.md).

def build_dump_header(error_rate, capacity, expansion, nonscaling, layers):
    """layers: [(capacity, error_rate, bits, hashes, items)]; returns the sealed header."""
    body = b"BLMDUMP1" + struct.pack("<IdQIII", 1, error_rate, capacity, expansion,
                                     1 if nonscaling else 0, len(layers))
    for layer in layers:
        body += struct.pack("<QdQIQ", *layer)
    return body + struct.pack("<Q", xxh64(body))



def parse_dump_header(header):
    """bloomery's BF.SCANDUMP header (version 2): dict of the options
    (tightening 0.5 unless flag bit 3 carries another) and its layers."""
    assert header[:8] == b"BLMDUMP1", header[:8]
    assert xxh64(header[:-8]) == struct.unpack_from("<Q", header, len(header) - 8)[0]
    version, error_rate, capacity, expansion, flags, count = struct.unpack_from("<IdQIII",
                                                                                header, 8)
    assert version == 2, version
    p = 40
    tightening = 0.5
    if flags & 8:
        (tightening,) = struct.unpack_from("<d", header, p)
        p += 8
    layers = []
    for _ in range(count):
        l_cap, l_err, bits, hashes, layout, items = struct.unpack_from("<QdQIIQ", header, p)
        layers.append(dict(capacity=l_cap, error_rate=l_err, bits=bits, hashes=hashes,
                           layout=layout, items=items))
        p += 40
    assert p + 8 == len(header)
    return dict(error_rate=error_rate, capacity=capacity, expansion=expansion, flags=flags,
                tightening=tightening, layers=layers)
