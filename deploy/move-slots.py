#!/usr/bin/python3
"""Moves every filter of some hash slots from one bloomery cluster node to another.

    deploy/move-slots.py --from 10.0.0.1:6379 --to 10.0.0.2:6379 5461-5600 7000

For each slot: lists its keys on the source (CLUSTER GETKEYSINSLOT, in
batches), and for each filter streams BF.SCANDUMP chunks from the source into
BF.LOADCHUNK on the target, copies its time to live (PTTL, PEXPIRE), checks
that the target's dump is byte for byte the source's, checks that the source
did not change meanwhile (BF.INFO's item count; if it did, the copy is made
again), and only then deletes the filter from the source. Every command is
sent after ASKING, which on bloomery lets one command through whatever the
node's map says (bloomery has no importing state): the target does not own
the slot yet. Then update --cluster-slots on every node and restart them
(deploy/README.md, "Moving slots").

Stop clients writing to the slots being moved, or accept that an add landing
on the source after its filter was copied and deleted is lost (it would create
a new filter there). Needs Debian's python3-redis. The password comes from
$REDISCLI_AUTH (as for redis-cli) or --password (visible in `ps`).
Exit status: 0 when every filter moved, 1 on an error (what was moved stays
moved; rerun to continue), 2 on bad arguments.
"""

import argparse
import hashlib
import os
import sys

import redis

SLOTS = 16384


def parse_node(text):
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise argparse.ArgumentTypeError("%r is not host:port" % text)
    return host.strip("[]"), int(port)


def parse_slots(words):
    slots = []
    for word in words:
        for part in word.split(","):
            first, _, last = part.partition("-")
            if not first.isdigit() or (last and not last.isdigit()):
                raise argparse.ArgumentTypeError("%r is not SLOT or FIRST-LAST" % part)
            first, last = int(first), int(last or first)
            if not first <= last < SLOTS:
                raise argparse.ArgumentTypeError("%r is not within 0-16383" % part)
            slots.extend(range(first, last + 1))
    return sorted(set(slots))


class MoveError(Exception):
    pass


def asking(conn, *command):
    """Runs `command` right after ASKING, in one round trip."""
    pipe = conn.pipeline(transaction=False)
    pipe.execute_command("ASKING")
    pipe.execute_command(*command)
    return pipe.execute()[1]


def info_items(conn, key):
    """(capacity, size, filters, items) of a filter, or None if it is gone."""
    try:
        reply = asking(conn, "BF.INFO", key)
    except redis.ResponseError as e:
        if "not found" in str(e):
            return None
        raise
    fields = dict(zip(reply[0::2], reply[1::2]))
    return tuple(fields.get(name) for name in
                 (b"Capacity", b"Size", b"Number of filters", b"Number of items inserted"))


def dump(conn, key, each_chunk):
    """Calls each_chunk(iterator, data) for every BF.SCANDUMP chunk; returns their digests."""
    digests = []
    cursor = 0
    while True:
        cursor, data = asking(conn, "BF.SCANDUMP", key, cursor)
        if cursor == 0:
            return digests
        digests.append(hashlib.sha256(b"%d:" % cursor + data).digest())
        each_chunk(cursor, data)


def copy_filter(source, target, key, replace):
    """Copies `key` once; returns (source state before the copy, bytes copied) or None if gone."""
    before = info_items(source, key)
    if before is None:
        return None
    ttl = asking(source, "PTTL", key)
    if asking(target, "EXISTS", key):
        if not replace:
            raise MoveError("%r already exists on the target (rerun with --replace to overwrite)"
                            % key)
        asking(target, "DEL", key)
    copied = [0]

    def load(cursor, data):
        asking(target, "BF.LOADCHUNK", key, cursor, data)
        copied[0] += len(data)

    try:
        source_digests = dump(source, key, load)
    except redis.ResponseError as e:
        if "not found" in str(e):  # deleted or expired under us
            asking(target, "DEL", key)
            return None
        raise
    if ttl is not None and ttl > 0:
        asking(target, "PEXPIRE", key, ttl)
    target_digests = dump(target, key, lambda cursor, data: None)
    if target_digests != source_digests:
        raise MoveError("%r: the target's dump differs from the source's" % key)
    return before, copied[0]


def move_filter(source, target, key, replace, attempts=3):
    for _attempt in range(attempts):
        result = copy_filter(source, target, key, replace)
        if result is None:
            return 0
        before, copied = result
        # An add that set a bit on the source while it was copied raised its
        # item count: copy again rather than drop it.
        if info_items(source, key) == before:
            asking(source, "DEL", key)
            return copied
        replace = True  # our own copy, now stale
    raise MoveError("%r kept changing on the source; stop its writers and rerun" % key)


def slot_owner(conn, slot):
    for first, last, primary, *_replicas in conn.execute_command("CLUSTER", "SLOTS"):
        if first <= slot <= last:
            host = primary[0].decode() if isinstance(primary[0], bytes) else primary[0]
            return host, int(primary[1])
    return None


def main(argv=None):
    parser = argparse.ArgumentParser(
        description="Move the filters of hash slots between bloomery cluster nodes "
                    "(BF.SCANDUMP / BF.LOADCHUNK), then update every node's --cluster-slots.")
    parser.add_argument("--from", dest="source", required=True, type=parse_node,
                        help="source node host:port (owns the slots now)")
    parser.add_argument("--to", dest="target", required=True, type=parse_node,
                        help="target node host:port (will own them)")
    parser.add_argument("slots", nargs="+", help="SLOT or FIRST-LAST, several allowed")
    parser.add_argument("--user", default=None, help="ACL user (default: default)")
    parser.add_argument("--password", default=os.environ.get("REDISCLI_AUTH"),
                        help="password (default: $REDISCLI_AUTH)")
    parser.add_argument("--batch", type=int, default=100,
                        help="keys listed per CLUSTER GETKEYSINSLOT (default 100)")
    parser.add_argument("--replace", action="store_true",
                        help="overwrite a key that already exists on the target")
    parser.add_argument("--force", action="store_true",
                        help="move even if the source's map says another node owns the slot")
    parser.add_argument("--dry-run", action="store_true",
                        help="only count the keys of each slot on the source")
    parser.add_argument("--timeout", type=float, default=60.0, help="socket timeout, seconds")
    args = parser.parse_args(argv)
    try:
        slots = parse_slots(args.slots)
    except argparse.ArgumentTypeError as e:
        parser.error(str(e))
    if args.source == args.target:
        parser.error("--from and --to are the same node")
    if args.batch < 1:
        parser.error("--batch must be at least 1")

    def connect(node):
        return redis.Redis(host=node[0], port=node[1], username=args.user,
                           password=args.password, socket_timeout=args.timeout)

    source, target = connect(args.source), connect(args.target)
    total_keys = total_bytes = 0
    try:
        for conn, node in ((source, args.source), (target, args.target)):
            if not conn.info("cluster").get("cluster_enabled"):
                raise MoveError("%s:%d is not in cluster mode" % node)
        for slot in slots:
            owner = slot_owner(source, slot) or ("(no node)", 0)
            if owner != args.source and not args.force:
                raise MoveError("slot %d belongs to %s:%d in the source's map, not to %s:%d "
                                "(--force to move it anyway)" % ((slot,) + owner + args.source))
            if args.dry_run:
                count = source.execute_command("CLUSTER", "COUNTKEYSINSLOT", slot)
                print("slot %d: %d keys on %s:%d" % ((slot, count) + args.source))
                continue
            moved = moved_bytes = 0
            while True:
                keys = source.execute_command("CLUSTER", "GETKEYSINSLOT", slot, args.batch)
                if not keys:
                    break
                for key in keys:
                    moved_bytes += move_filter(source, target, key, args.replace)
                    moved += 1
            if moved:
                print("slot %d: moved %d filters (%d bytes)" % (slot, moved, moved_bytes))
            total_keys += moved
            total_bytes += moved_bytes
    except (MoveError, redis.RedisError) as e:
        print("move-slots: %s" % e, file=sys.stderr)
        print("move-slots: moved %d filters before the error" % total_keys, file=sys.stderr)
        return 1
    if not args.dry_run:
        print("moved %d filters (%d bytes) of %d slots from %s:%d to %s:%d; now give every node "
              "the new --cluster-slots and restart them (deploy/README.md, \"Moving slots\")"
              % ((total_keys, total_bytes, len(slots)) + args.source + args.target))
    return 0


if __name__ == "__main__":
    sys.exit(main())
