#!/usr/bin/python3
"""Copies every Bloom and Cuckoo filter of a live Redis + RedisBloom into bloomery.

    deploy/migrate-from-redisbloom.py --from redis.internal:6379 --to bloomery.internal:6379 --verify

Lists the source's Bloom filters (SCAN ... TYPE MBbloom--, in batches of
--count), and for each streams its BF.SCANDUMP chunks into BF.LOADCHUNK on
the target and gives it the source's time to live (PTTL, then PEXPIRE). The
filter keeps RedisBloom's hashing and bits on bloomery (its hash scheme is
"redisbloom", BF.INFO key SCHEME), so every item answers as it did, false
positives included, and later adds land where RedisBloom would have put them.
Then its Cuckoo filters (TYPE MBbloomCF) the same way, with CF.SCANDUMP and
CF.LOADCHUNK: every slot, count and setting as the source holds them. A
Cuckoo filter without items has no dump (CF.SCANDUMP answers nothing); it is
created empty with CF.RESERVE and the source's CF.INFO settings (bucket
count and size, expansion, max iterations), and a warning names it if its
sub-filter count or deletes count could not be carried that way. A filter
the source changed while it was copied (its BF.INFO or CF.INFO counts moved)
is copied again. The source is only read.

--verify compares each copy with its source: BF.INFO's five fields or
CF.INFO's eight, and the SHA-256 of the whole BF.SCANDUMP / CF.SCANDUMP
stream (bloomery dumps a migrated filter in RedisBloom's own format, byte for
byte the same); --sample N also asks both sides BF.MEXISTS / CF.MEXISTS for N
random items and requires the same answers.

Both commands' chunks are RedisBloom's own format both ways, so the same tool
copies filters back from bloomery to RedisBloom (--from bloomery --to
redis). Keys that already exist on the target are an error unless
--replace. Progress goes to stderr about once a second (--quiet: only the
summary).

Passwords come from $MIGRATE_FROM_PASSWORD / $MIGRATE_TO_PASSWORD, or
--from-password / --to-password (visible in `ps`). TLS: --from-tls /
--to-tls with --*-cacert, --*-cert, --*-key, or --*-insecure to skip
certificate checks. Needs Debian's python3-redis. Exit status: 0 when every
filter was copied (and verified), 1 on an error (what was copied stays; rerun
with --replace to redo), 2 on bad arguments.
"""

import argparse
import hashlib
import os
import random
import sys
import time

import redis

from scandump_digest import ScandumpDigest

BLOOM_TYPE = "MBbloom--"
CUCKOO_TYPE = "MBbloomCF"


class Kind:
    """One kind of filter: its TYPE name, commands and INFO fields compared."""

    def __init__(self, type_name, prefix, what, info_fields):
        self.type_name = type_name
        self.what = what
        self.info_cmd = prefix + ".INFO"
        self.scandump_cmd = prefix + ".SCANDUMP"
        self.loadchunk_cmd = prefix + ".LOADCHUNK"
        self.mexists_cmd = prefix + ".MEXISTS"
        self.info_fields = info_fields


BLOOM = Kind(BLOOM_TYPE, "BF", "Bloom filter",
             (b"Capacity", b"Size", b"Number of filters", b"Number of items inserted",
              b"Expansion rate"))
CUCKOO = Kind(CUCKOO_TYPE, "CF", "Cuckoo filter",
              (b"Size", b"Number of buckets", b"Number of filters", b"Number of items inserted",
               b"Number of items deleted", b"Bucket size", b"Expansion rate", b"Max iterations"))


class MigrationError(Exception):
    pass


def parse_node(text):
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise argparse.ArgumentTypeError("%r is not host:port" % text)
    return host.strip("[]"), int(port)


def connect(args, side):
    """A client for --from (side "from") or --to (side "to")."""
    host, port = getattr(args, side)
    options = dict(host=host, port=port, db=args.from_db if side == "from" else 0,
                   username=getattr(args, side + "_user"),
                   password=getattr(args, side + "_password"),
                   socket_timeout=args.timeout, socket_connect_timeout=args.timeout)
    if getattr(args, side + "_tls"):
        options.update(ssl=True, ssl_ca_certs=getattr(args, side + "_cacert"),
                       ssl_certfile=getattr(args, side + "_cert"),
                       ssl_keyfile=getattr(args, side + "_key"),
                       ssl_cert_reqs="none" if getattr(args, side + "_insecure") else "required")
        if getattr(args, side + "_insecure"):
            options["ssl_check_hostname"] = False
    return redis.Redis(**options)


def name(key):
    return key.decode("utf-8", "backslashreplace") if isinstance(key, bytes) else key


def scan(conn, match, count, type_name):
    """Every key of `type_name` (SCAN's TYPE filter), in batches."""
    cursor = 0
    while True:
        cursor, keys = conn.execute_command("SCAN", cursor, "MATCH", match, "COUNT", count,
                                            "TYPE", type_name)
        yield from keys
        if int(cursor) == 0:
            return


def info(conn, kind, key):
    """BF.INFO's five fields or CF.INFO's eight, or None if the key is gone."""
    try:
        reply = conn.execute_command(kind.info_cmd, key)
    except redis.ResponseError as e:
        if "not found" in str(e):
            return None
        raise
    fields = dict(zip(reply[0::2], reply[1::2]))
    return tuple(fields.get(field) for field in kind.info_fields)


def dump(conn, kind, key, each_chunk):
    """Calls each_chunk(iterator, data) for the BF.SCANDUMP / CF.SCANDUMP
    stream; returns its digest: for a Bloom filter, of the bits the stream
    describes (scandump_digest: RedisBloom dumps every byte, bloomery leaves
    out ranges it knows to be zero), for a Cuckoo filter, of the stream."""
    bits = ScandumpDigest() if kind is BLOOM else None
    stream = hashlib.sha256()
    cursor = 0
    while True:
        cursor, data = conn.execute_command(kind.scandump_cmd, key, cursor)
        if cursor == 0:
            return bits.digest() if bits is not None else stream.digest()
        data = data or b""
        if bits is not None:
            bits.add(cursor, data)
        else:
            stream.update(b"%d:%d:" % (cursor, len(data)))
            stream.update(data)
        each_chunk(cursor, data)


# What CF.RESERVE gives an empty Cuckoo filter, which has no dump to copy.
EMPTY_CUCKOO_FIELDS = (b"Number of buckets", b"Number of items inserted", b"Bucket size",
                       b"Expansion rate", b"Max iterations")


def reserve_empty_cuckoo(target, key, before):
    """An empty Cuckoo filter (no dump to copy) made with the source's settings."""
    fields = dict(zip(CUCKOO.info_fields, before))
    if fields[b"Number of filters"] != 1 or fields[b"Number of items deleted"] != 0:
        print("migrate: warning: %s is an empty Cuckoo filter of %d sub-filters with %d deletes "
              "counted: it has no dump, and is copied as a new empty filter of its settings "
              "(1 sub-filter, 0 deletes)" % (name(key), fields[b"Number of filters"],
                                             fields[b"Number of items deleted"]),
              file=sys.stderr)
    bucket_size = fields[b"Bucket size"]
    target.execute_command("CF.RESERVE", key, fields[b"Number of buckets"] * bucket_size,
                           "BUCKETSIZE", bucket_size,
                           "MAXITERATIONS", fields[b"Max iterations"],
                           "EXPANSION", fields[b"Expansion rate"])


def copy_filter(source, target, kind, key, replace):
    """Copies `key` once. Returns (source INFO before, bytes copied, source
    digest), or None when the key is gone from the source."""
    before = info(source, kind, key)
    if before is None:
        return None
    ttl = source.pttl(key)
    if target.exists(key):
        if not replace:
            raise MigrationError("%r already exists on the target (--replace overwrites it)"
                                 % name(key))
        target.delete(key)
    copied = [0]

    def load(cursor, data):
        try:
            target.execute_command(kind.loadchunk_cmd, key, cursor, data)
        except redis.ResponseError as e:
            raise MigrationError("%r: the target refused a chunk at iterator %d: %s"
                                 % (name(key), cursor, e))
        copied[0] += len(data)

    try:
        digest = dump(source, kind, key, load)
    except redis.ResponseError as e:
        if "not found" in str(e):  # deleted or expired while copied
            target.delete(key)
            return None
        raise
    if copied[0] == 0 and kind is CUCKOO:
        reserve_empty_cuckoo(target, key, before)
    if ttl is not None and ttl > 0:
        target.pexpire(key, ttl)
    return before, copied[0], digest


def verify(source, target, kind, key, source_digest, sample, rng):
    """Raises MigrationError unless the target's copy answers as the source."""
    source_info, target_info = info(source, kind, key), info(target, kind, key)
    if kind is CUCKOO and source_info is not None and target_info is not None and \
            dict(zip(kind.info_fields, source_info))[b"Number of items inserted"] == 0:
        # Made again by CF.RESERVE: its settings are what it carries.
        keep = [kind.info_fields.index(field) for field in EMPTY_CUCKOO_FIELDS]
        source_info = tuple(source_info[i] for i in keep)
        target_info = tuple(target_info[i] for i in keep)
    if target_info != source_info:
        raise MigrationError("%r: %s differs: source %s, target %s"
                             % (name(key), kind.info_cmd, source_info, target_info))
    target_digest = dump(target, kind, key, lambda cursor, data: None)
    if target_digest != source_digest:
        raise MigrationError("%r: the target's %s differs from the source's"
                             % (name(key), kind.scandump_cmd))
    if sample:
        probes = ["migrate-sample:%x" % rng.getrandbits(64) for _ in range(sample)]
        for start in range(0, len(probes), 1000):
            batch = probes[start:start + 1000]
            a = source.execute_command(kind.mexists_cmd, key, *batch)
            b = target.execute_command(kind.mexists_cmd, key, *batch)
            if [int(x) for x in a] != [int(x) for x in b]:
                raise MigrationError("%r: %s answers differ for sampled items"
                                     % (name(key), kind.mexists_cmd))


def migrate_filter(source, target, kind, key, args, rng, attempts=3):
    """Copies (and verifies) one filter; returns the bytes copied (0: gone)."""
    replace = args.replace
    for _attempt in range(attempts):
        result = copy_filter(source, target, kind, key, replace)
        if result is None:
            return 0
        before, copied, digest = result
        # An add (or a delete) that reached the source while it was copied
        # may have changed chunks already sent: copy again rather than lose it.
        if info(source, kind, key) == before:
            if args.verify or args.sample:
                verify(source, target, kind, key, digest, args.sample, rng)
            return copied
        replace = True  # our own copy, now stale
    raise MigrationError("%r kept changing on the source; stop its writers and rerun with "
                         "--replace" % name(key))


class Progress:
    def __init__(self, quiet):
        self.quiet = quiet
        self.started = self.last = time.monotonic()
        self.filters = self.bytes = 0
        self.by_kind = {BLOOM: 0, CUCKOO: 0}

    def add(self, kind, copied):
        self.filters += 1
        self.by_kind[kind] += 1
        self.bytes += copied
        now = time.monotonic()
        if not self.quiet and now - self.last >= 1.0:
            self.last = now
            print("migrate: %d filters, %.1f MB copied (%.0f s)"
                  % (self.filters, self.bytes / 1e6, now - self.started), file=sys.stderr)


def main(argv=None):
    parser = argparse.ArgumentParser(
        description="Copy every RedisBloom Bloom and Cuckoo filter of a Redis server into "
                    "bloomery (BF.SCANDUMP / BF.LOADCHUNK, CF.SCANDUMP / CF.LOADCHUNK, TTLs "
                    "kept), or back.")
    parser.add_argument("--from", dest="from", required=True, type=parse_node,
                        help="source Redis + RedisBloom, host:port")
    parser.add_argument("--to", dest="to", required=True, type=parse_node,
                        help="target bloomery, host:port")
    parser.add_argument("--from-db", type=int, default=0, help="source database (default 0)")
    for side, what in (("from", "source"), ("to", "target")):
        parser.add_argument("--%s-user" % side, default=None, help="%s ACL user" % what)
        parser.add_argument("--%s-password" % side,
                            default=os.environ.get("MIGRATE_%s_PASSWORD" % side.upper()),
                            help="%s password (default: $MIGRATE_%s_PASSWORD)"
                                 % (what, side.upper()))
        parser.add_argument("--%s-tls" % side, action="store_true", help="TLS to the " + what)
        parser.add_argument("--%s-cacert" % side, default=None,
                            help="CA certificate(s) to check the %s's certificate" % what)
        parser.add_argument("--%s-cert" % side, default=None,
                            help="client certificate for the " + what)
        parser.add_argument("--%s-key" % side, default=None, help="client key for the " + what)
        parser.add_argument("--%s-insecure" % side, action="store_true",
                            help="do not check the %s's certificate" % what)
    parser.add_argument("--match", default="*", help="only keys matching this glob (default *)")
    parser.add_argument("--count", type=int, default=100, help="SCAN's COUNT (default 100)")
    parser.add_argument("--replace", action="store_true",
                        help="overwrite keys that already exist on the target")
    parser.add_argument("--verify", action="store_true",
                        help="compare BF.INFO / CF.INFO and the whole dump of every copy with its "
                             "source")
    parser.add_argument("--sample", type=int, default=0, metavar="N",
                        help="with or without --verify: also compare BF.MEXISTS / CF.MEXISTS "
                             "answers for N random items per filter")
    parser.add_argument("--dry-run", action="store_true",
                        help="only list what would be copied")
    parser.add_argument("--quiet", action="store_true", help="no progress lines")
    parser.add_argument("--timeout", type=float, default=60.0, help="socket timeout, seconds")
    args = parser.parse_args(argv)
    if args.count < 1:
        parser.error("--count must be at least 1")
    if args.sample < 0:
        parser.error("--sample must not be negative")
    if args.__dict__["from"] == args.to and args.from_db == 0:
        parser.error("--from and --to are the same server")
    args.verify = args.verify or args.sample > 0
    source, target = connect(args, "from"), connect(args, "to")
    rng = random.Random()
    progress = Progress(args.quiet)
    failed_key = None
    try:
        for conn, what in ((source, "source"), (target, "target")):
            try:
                conn.ping()
            except redis.RedisError as e:
                raise MigrationError("cannot reach the %s: %s" % (what, e))
        for kind in (BLOOM, CUCKOO):
            for key in scan(source, args.match, args.count, kind.type_name):
                if args.dry_run:
                    print("would copy %s (%s)" % (name(key), kind.what))
                    progress.add(kind, 0)
                    continue
                failed_key = key
                progress.add(kind, migrate_filter(source, target, kind, key, args, rng))
                failed_key = None
    except (MigrationError, redis.RedisError) as e:
        where = "" if failed_key is None or isinstance(e, MigrationError) else \
            " (key %r)" % name(failed_key)
        print("migrate: %s%s" % (e, where), file=sys.stderr)
        print("migrate: %d filters copied before the error" % progress.filters, file=sys.stderr)
        return 1
    print("%s %d Bloom filters and %d Cuckoo filters (%.1f MB)%s in %.1f s"
          % ("would copy" if args.dry_run else "copied", progress.by_kind[BLOOM],
             progress.by_kind[CUCKOO], progress.bytes / 1e6,
             ", verified" if args.verify and not args.dry_run else "",
             time.monotonic() - progress.started))
    return 0


if __name__ == "__main__":
    sys.exit(main())
