"""Soak: 1,000 concurrent connections for a bounded time (BLOOMERY_SOAK_SECONDS,
default 45) with mixed BF.* commands, abrupt disconnects, half-sent frames,
slow readers and protocol garbage. Every well-formed command must get the
right answer (no false negative, exact reply shapes), the server must never
crash, and once the clients are gone and their keys deleted its RSS must be
back within 20 % of what it was after a warm-up round (the allocator's arenas
and thread caches exist by then; the product build's jemalloc returns freed
pages, sanitizer builds keep them in quarantine, so RSS is checked on the
jemalloc build only).
"""

import asyncio
import os
import random
import resource
import time
import unittest


from harness import rss_bytes, Server, wait_until

CONNECTIONS = 1000
SECONDS = float(os.environ.get("BLOOMERY_SOAK_SECONDS", "45"))




def encode(*args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


class ProtocolError(Exception):
    pass


async def read_reply(reader):
    line = await reader.readline()
    if not line.endswith(b"\r\n"):
        raise ConnectionError("connection closed")
    kind, body = line[:1], line[1:-2]
    if kind == b"+":
        return body
    if kind == b"-":
        return ProtocolError(body.decode())
    if kind == b":":
        return int(body)
    if kind == b"$":
        n = int(body)
        if n < 0:
            return None
        data = await reader.readexactly(n + 2)
        return data[:-2]
    if kind == b"*":
        n = int(body)
        return None if n < 0 else [await read_reply(reader) for _ in range(n)]
    if kind == b"%":
        n = int(body)
        return [await read_reply(reader) for _ in range(2 * n)]
    raise AssertionError("unexpected reply type %r" % line)


class Client:
    """One soak connection with its own keys, so every answer is predictable."""

    def __init__(self, port, index, stats, problems):
        self.port = port
        self.index = index
        self.rng = random.Random(index)
        self.stats = stats
        self.problems = problems
        self.keys = {}  # key -> set of items acknowledged as added
        self.next_item = 0

    def problem(self, text):
        if len(self.problems) < 20:
            self.problems.append("client %d: %s" % (self.index, text))

    async def connect(self):
        return await asyncio.wait_for(asyncio.open_connection("127.0.0.1", self.port), 30)

    async def well_formed_round(self, reader, writer):
        key = "soak:%d:%d" % (self.index, self.rng.randrange(3))
        added = self.keys.setdefault(key, set())
        new = ["i%d" % (self.next_item + j) for j in range(self.rng.randint(1, 20))]
        self.next_item += len(new)
        old = self.rng.sample(sorted(added), min(len(added), 10))
        writer.write(encode("BF.MADD", key, *new) + encode("BF.MEXISTS", key, *(new + old)) +
                     encode("BF.EXISTS", key, new[0]) + encode("BF.CARD", key) +
                     encode("BF.INFO", key, "ITEMS") + encode("PING"))
        await writer.drain()
        madd = await read_reply(reader)
        mexists = await read_reply(reader)
        exists = await read_reply(reader)
        card = await read_reply(reader)
        items = await read_reply(reader)
        pong = await read_reply(reader)
        self.stats["commands"] += 6
        # A new item may answer 0 (a false positive says "maybe present") but
        # never an error here, and every added item must then be present.
        if not (isinstance(madd, list) and len(madd) == len(new) and
                all(x in (0, 1) for x in madd)):
            self.problem("BF.MADD replied %r" % (madd,))
        if mexists != [1] * (len(new) + len(old)):
            self.problem("false negative: BF.MEXISTS replied %r" % (mexists,))
        if exists != 1:
            self.problem("false negative: BF.EXISTS replied %r" % (exists,))
        if not isinstance(card, int) or card < 0:
            self.problem("BF.CARD replied %r" % (card,))
        if not (isinstance(items, list) and len(items) == 1 and isinstance(items[0], int)):
            self.problem("BF.INFO ITEMS replied %r" % (items,))
        if pong != b"PONG":
            self.problem("PING replied %r" % (pong,))
        added.update(new)

    async def slow_reader_round(self, reader, writer):
        # Many pipelined replies, read after a pause and in small pieces.
        key = "soak:%d:0" % self.index
        writer.write(encode("BF.ADD", key, "slow") * 200)
        await writer.drain()
        await asyncio.sleep(self.rng.uniform(0.2, 1.0))
        for _ in range(200):
            reply = await read_reply(reader)
            if reply not in (0, 1):
                self.problem("pipelined BF.ADD replied %r" % (reply,))
        self.keys.setdefault(key, set()).add("slow")
        self.stats["commands"] += 200

    async def half_frame_round(self, reader, writer):
        # A command split mid-argument, completed after a pause.
        frame = encode("BF.EXISTS", "soak:%d:0" % self.index, "never-added")
        cut = self.rng.randrange(1, len(frame))
        writer.write(frame[:cut])
        await writer.drain()
        await asyncio.sleep(self.rng.uniform(0.05, 0.5))
        writer.write(frame[cut:])
        await writer.drain()
        reply = await read_reply(reader)
        if reply not in (0, 1):
            self.problem("split BF.EXISTS replied %r" % (reply,))
        self.stats["commands"] += 1

    async def run(self, deadline):
        while time.monotonic() < deadline:
            behaviour = self.rng.random()
            try:
                if behaviour < 0.08:
                    # Abrupt disconnect in the middle of a frame.
                    reader, writer = await self.connect()
                    frame = encode("BF.MADD", "soak:%d:9" % self.index, *["x"] * 50)
                    writer.write(frame[:self.rng.randrange(1, len(frame))])
                    await writer.drain()
                    writer.transport.abort()
                    self.stats["aborts"] += 1
                    continue
                if behaviour < 0.12:
                    # Garbage: answered with a protocol error, then closed.
                    reader, writer = await self.connect()
                    writer.write(b"*1\r\n$abc\r\n")
                    await writer.drain()
                    reply = await read_reply(reader)
                    if not (isinstance(reply, ProtocolError) and
                            str(reply).startswith("ERR Protocol error")):
                        self.problem("garbage got %r" % (reply,))
                    if await reader.read(1) != b"":
                        self.problem("connection stayed open after a protocol error")
                    writer.close()
                    self.stats["protocol_errors"] += 1
                    continue
                reader, writer = await self.connect()
                for _ in range(self.rng.randint(1, 8)):
                    if time.monotonic() >= deadline:
                        break
                    kind = self.rng.random()
                    if kind < 0.7:
                        await self.well_formed_round(reader, writer)
                    elif kind < 0.85:
                        await self.slow_reader_round(reader, writer)
                    else:
                        await self.half_frame_round(reader, writer)
                    await asyncio.sleep(self.rng.uniform(0, 0.05))
                writer.close()
            except (ConnectionError, asyncio.IncompleteReadError, asyncio.TimeoutError) as e:
                self.problem("connection failed: %r" % (e,))
                await asyncio.sleep(0.1)

    async def verify_and_clean(self):
        reader, writer = await self.connect()
        for key, items in self.keys.items():
            if items:
                writer.write(encode("BF.MEXISTS", key, *sorted(items)))
                await writer.drain()
                reply = await read_reply(reader)
                if reply != [1] * len(items):
                    self.problem("false negative at the end for %s" % key)
        keys = list(self.keys) + ["soak:%d:9" % self.index]
        writer.write(encode("DEL", *keys))
        await writer.drain()
        await read_reply(reader)
        writer.close()


async def soak(port, seconds, stats, problems, clients=CONNECTIONS):
    deadline = time.monotonic() + seconds
    workers = [Client(port, i, stats, problems) for i in range(clients)]
    await asyncio.gather(*(w.run(deadline) for w in workers))
    # Cleanup in batches so the checking connections stay within limits.
    for start in range(0, len(workers), 100):
        await asyncio.gather(*(w.verify_and_clean() for w in workers[start:start + 100]))


class Soak(unittest.TestCase):
    def test_thousand_connections_with_hostile_behaviour(self):
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft < 4096:
            resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 8192), hard))
        server = Server("--maxclients", "4000", threads=2)
        self.addCleanup(server.cleanup)
        server.start()
        r = server.client()
        jemalloc = r.info("memory")["mem_allocator"].startswith("jemalloc")
        stats = {"commands": 0, "aborts": 0, "protocol_errors": 0}
        problems = []
        # Warm-up: every connection once, then its keys deleted.
        asyncio.run(soak(server.port, 2, stats, problems))
        self.assertEqual(r.dbsize(), 0)
        time.sleep(1)
        rss_start = rss_bytes(server.process.pid)
        started = time.monotonic()
        asyncio.run(soak(server.port, SECONDS, stats, problems))
        elapsed = time.monotonic() - started
        self.assertEqual(problems, [])
        self.assertIsNone(server.process.poll(), "the server exited")
        self.assertEqual(r.dbsize(), 0)
        # Every soak connection is gone (the server notices closes at once).
        wait_until(lambda: int(r.info("clients")["connected_clients"]) <= 1, 10,
                   "the soak's connections to be gone", interval=0.1)
        self.assertEqual(int(r.info("clients")["connected_clients"]), 1)
        rss_end = rss_bytes(server.process.pid)
        if jemalloc:
            def purged():  # by jemalloc's background purge
                nonlocal rss_end
                rss_end = rss_bytes(server.process.pid)
                return rss_end <= rss_start * 1.2
            wait_until(purged, 60, lambda: "RSS within 20 %% of %.1f MB (it is %.1f MB)" %
                       (rss_start / 1e6, rss_end / 1e6), interval=0.5)
        print("\n[ measured ] soak %.0f s: %d commands, %d aborted connections, %d protocol "
              "errors; RSS %.1f MB -> %.1f MB" % (elapsed, stats["commands"], stats["aborts"],
                                                  stats["protocol_errors"], rss_start / 1e6,
                                                  rss_end / 1e6))
        self.assertGreater(stats["commands"], 10000)
        self.assertGreater(stats["aborts"], 100)
        if jemalloc:
            self.assertLessEqual(rss_end, rss_start * 1.2)
        self.assertTrue(r.ping())


if __name__ == "__main__":
    unittest.main()
