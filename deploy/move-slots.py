#!/usr/bin/python3
"""Moves every filter of some hash slots from one bloomery cluster node to another.

    deploy/move-slots.py --from 10.0.0.1:6379 --to 10.0.0.2:6379 5461-5600 7000

For each slot, as Redis Cluster's resharding does: the target is told it
imports the slot (CLUSTER SETSLOT IMPORTING) and the source that it migrates
it (MIGRATING), so that while the slot moves a key still on the source is
served there and a missing one answers -ASK to the target, which cluster
clients follow. Then each filter is copied: BF.SCANDUMP chunks from the
source into BF.LOADCHUNK on the target (after ASKING), its time to live
(PTTL, PEXPIRE), a check that the target's dump is byte for byte the
source's, and the source's copy deleted in a transaction that WATCHed the
key before the copy: an add that reached the source meanwhile aborts the
delete and the filter is copied again, so no add is lost. Once the slot is
empty on the source, every primary is told the target owns it (SETSLOT
NODE). Give every node the new --cluster-slots before its next restart
(deploy/README.md, "Moving slots").

A filter that keeps changing through every attempt stops the move: its
partial copy on the target is deleted, the slot stays migrating (what was
moved answers through -ASK), and a rerun continues. Needs Debian's
python3-redis. The password comes from $REDISCLI_AUTH (as for redis-cli) or
--password (visible in `ps`). Exit status: 0 when every filter moved, 1 on
an error (rerun to continue), 2 on bad arguments.
"""

import argparse
import os
import sys

import redis

from scandump_digest import ScandumpDigest

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
    """Runs `command` right after ASKING on the same connection."""
    conn.execute_command("ASKING")
    return conn.execute_command(*command)


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
    """Calls each_chunk(iterator, data) for every BF.SCANDUMP chunk; returns
    the digest of the bits they describe (scandump_digest)."""
    digest = ScandumpDigest()
    cursor = 0
    while True:
        cursor, data = asking(conn, "BF.SCANDUMP", key, cursor)
        if cursor == 0:
            return digest.digest()
        digest.add(cursor, data)
        each_chunk(cursor, data)


def copy_filter(source, target, key, replace):
    """Copies `key` once; returns the bytes copied, or None if it is gone.

    Leaves the key WATCHed on the source's connection."""
    asking(source, "WATCH", key)
    if info_items(source, key) is None:
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
    return copied[0]


def delete_if_unchanged(source, key):
    """Deletes `key` from the source unless it changed since WATCH; True if deleted."""
    source.execute_command("ASKING")
    source.execute_command("MULTI")
    source.execute_command("DEL", key)
    return source.execute_command("EXEC") is not None


def move_filter(source, target, key, replace, attempts=3):
    try:
        for _attempt in range(attempts):
            copied = copy_filter(source, target, key, replace)
            if copied is None:
                source.execute_command("UNWATCH")
                return 0
            # An add that set a bit on the source while it was copied touched
            # the WATCHed key: the delete aborts and the filter is copied again.
            if delete_if_unchanged(source, key):
                return copied
            replace = True  # our own copy, now stale
    except BaseException:
        remove_partial_copy(source, target, key)
        raise
    remove_partial_copy(source, target, key)
    raise MoveError("%r kept changing on the source; stop its writers and rerun" % key)


def remove_partial_copy(source, target, key):
    """Deletes the target's copy of a key still on the source (a move that stopped)."""
    try:
        source.execute_command("UNWATCH")
        if asking(source, "EXISTS", key):
            asking(target, "DEL", key)
    except redis.RedisError:
        pass  # the error that stopped the move is the one to report


def slot_owner(conn, slot):
    for first, last, primary, *_replicas in conn.execute_command("CLUSTER", "SLOTS"):
        if first <= slot <= last:
            host = primary[0].decode() if isinstance(primary[0], bytes) else primary[0]
            return host, int(primary[1])
    return None


def text(value):
    return value.decode() if isinstance(value, bytes) else value


def primaries(conn):
    """(host, port) of every primary in `conn`'s CLUSTER NODES."""
    nodes = []
    for line in text(conn.execute_command("CLUSTER", "NODES")).splitlines():
        fields = line.split()
        if len(fields) >= 3 and "master" in fields[2].split(","):
            address = fields[1].split("@")[0]
            host, _, port = address.rpartition(":")
            nodes.append((host.strip("[]"), int(port)))
    return nodes


class SlotMove:
    """One slot's move: opens it on both nodes, moves its filters, hands it over."""

    def __init__(self, args, source, target, connect):
        self.args, self.source, self.target, self.connect = args, source, target, connect
        self.source_id = text(source.execute_command("CLUSTER", "MYID"))
        self.target_id = text(target.execute_command("CLUSTER", "MYID"))

    def plan(self, slot):
        """'move' (the source owns the slot), 'strays' (keys left on a non-owner, --force),
        'done' (already the target's, nothing left on the source)."""
        owner = slot_owner(self.source, slot) or ("(no node)", 0)
        if owner == self.args.source:
            return "move"
        if self.source.execute_command("CLUSTER", "COUNTKEYSINSLOT", slot) == 0 \
                and owner == self.args.target:
            return "done"
        if self.args.force:
            return "strays"
        raise MoveError("slot %d belongs to %s:%d in the source's map, not to %s:%d "
                        "(--force to move it anyway)" % ((slot,) + owner + self.args.source))

    def open(self, slot, how):
        if how == "move":
            self.target.execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", self.source_id)
            self.source.execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", self.target_id)
        else:  # the source serves its strays to ASKING while it "imports" the slot
            self.source.execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", self.target_id)

    def move_keys(self, slot):
        moved = moved_bytes = 0
        while True:
            keys = self.source.execute_command("CLUSTER", "GETKEYSINSLOT", slot, self.args.batch)
            if not keys:
                return moved, moved_bytes
            for key in keys:
                moved_bytes += move_filter(self.source, self.target, key, self.args.replace,
                                           self.args.attempts)
                moved += 1

    def close(self, slot, how):
        if how == "strays":
            self.source.execute_command("CLUSTER", "SETSLOT", slot, "STABLE")
            return
        # The target first (its claim ends the import), then the source, then
        # every other primary the source knows.
        self.target.execute_command("CLUSTER", "SETSLOT", slot, "NODE", self.target_id)
        self.source.execute_command("CLUSTER", "SETSLOT", slot, "NODE", self.target_id)
        for node in primaries(self.source):
            if node in (self.args.source, self.args.target):
                continue
            other = self.connect(node)
            try:
                other.execute_command("CLUSTER", "SETSLOT", slot, "NODE", self.target_id)
            finally:
                other.close()


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
    parser.add_argument("--attempts", type=int, default=3,
                        help="copies of a filter that changes while it is copied before the move "
                             "stops (default 3)")
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
    if args.attempts < 1:
        parser.error("--attempts must be at least 1")

    def connect(node):
        # One connection per node: ASKING and WATCH hold for the connection
        # they were sent on. DEL answers +QUEUED inside MULTI: taken as it is.
        conn = redis.Redis(host=node[0], port=node[1], username=args.user,
                           password=args.password, socket_timeout=args.timeout,
                           single_connection_client=True)
        conn.set_response_callback("DEL", lambda reply, **_options: reply)
        return conn

    source, target = connect(args.source), connect(args.target)
    total_keys = total_bytes = 0
    try:
        for conn, node in ((source, args.source), (target, args.target)):
            if not conn.info("cluster").get("cluster_enabled"):
                raise MoveError("%s:%d is not in cluster mode" % node)
        mover = SlotMove(args, source, target, connect)
        for slot in slots:
            how = mover.plan(slot)
            if args.dry_run:
                count = source.execute_command("CLUSTER", "COUNTKEYSINSLOT", slot)
                print("slot %d: %d keys on %s:%d" % ((slot, count) + args.source))
                continue
            if how == "done":
                print("slot %d: already served by %s:%d" % ((slot,) + args.target))
                continue
            mover.open(slot, how)
            moved, moved_bytes = mover.move_keys(slot)
            mover.close(slot, how)
            if moved:
                print("slot %d: moved %d filters (%d bytes)" % (slot, moved, moved_bytes))
            total_keys += moved
            total_bytes += moved_bytes
    except (MoveError, redis.RedisError) as e:
        print("move-slots: %s" % e, file=sys.stderr)
        print("move-slots: moved %d filters before the error; the slot being moved stays "
              "migrating (rerun to continue)" % total_keys, file=sys.stderr)
        return 1
    finally:
        source.close()
        target.close()
    if not args.dry_run:
        print("moved %d filters (%d bytes) of %d slots from %s:%d to %s:%d; the nodes serve "
              "the new map now: give every node the new --cluster-slots before its next restart "
              "(deploy/README.md, \"Moving slots\")"
              % ((total_keys, total_bytes, len(slots)) + args.source + args.target))
    return 0


if __name__ == "__main__":
    sys.exit(main())
