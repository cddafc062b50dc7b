"""Generic (non-BF) Redis commands bloomery serves, through redis-py, and the
real redis-cli / redis-benchmark tools against the real binary. The commands
on keys (DEL, KEYS, SCAN, RENAME, EXPIRE and the like) are in
test_key_commands.py.
"""

import json
import os
import subprocess
import tempfile
import time
import unittest


import harness
from test_protocol import Err, RespConnection, encode

COMMANDS_JSON = os.path.join(harness.ROOT, "proto", "commands.json")


def run_tool(args, stdin_data=None, timeout=60):
    return subprocess.run(args, input=stdin_data, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          timeout=timeout, check=False)


class CommandsTestCase(harness.SharedServerTestCase):
    """Commands against the class's one server: self.r is a redis-py client
    of an emptied keyspace, raw() a RESP connection of the test's own."""

    def setUp(self):
        self.r = self.server.client()
        self.addCleanup(self.r.close)
        self.r.flushall()

    def raw(self):
        c = RespConnection(self.server.port)
        self.addCleanup(c.close)
        return c

    def error_of(self, *args):
        reply = self.raw().call(*args)
        self.assertIsInstance(reply, Err, "%r replied %r" % (args, reply))
        return reply.decode()

    def info_section(self, section):
        text = self.raw().call("INFO", section)
        fields = {}
        for line in text.decode().splitlines():
            if line and not line.startswith("#") and ":" in line:
                k, v = line.split(":", 1)
                fields[k] = v
        return fields


class GenericCommandsTest(CommandsTestCase):

    # ---- connection -------------------------------------------------------

    def test_ping_echo(self):
        self.assertTrue(self.r.ping())
        self.assertEqual(self.raw().call("PING", "hello"), b"hello")
        self.assertEqual(self.r.echo("x y\r\nz"), b"x y\r\nz")
        self.assertTrue(self.error_of("PING", "a", "b").startswith("ERR wrong number of arguments for 'ping'"))
        self.assertTrue(self.error_of("ECHO").startswith("ERR wrong number of arguments for 'echo'"))

    def test_select(self):
        self.assertTrue(self.r.execute_command("SELECT", "0"))
        self.assertEqual(self.error_of("SELECT", "1"), "ERR DB index is out of range")
        self.assertTrue(self.error_of("SELECT", "abc").startswith("ERR"))
        self.assertTrue(self.r.ping())

    def test_unknown_command(self):
        text = self.error_of("NOSUCHCMD", "a", "b")
        self.assertTrue(text.startswith("ERR unknown command"), text)
        self.assertIn("nosuchcmd", text.lower())
        # Redis commands bloomery does not have are unknown too, not crashes.
        for cmd in (("SET", "a", "b"), ("GET", "a"), ("CMS.INITBYDIM", "a", 1, 1), ("BF.NOPE", "k")):
            self.assertTrue(self.error_of(*cmd).startswith("ERR unknown command"), cmd)
        # Never echoes CR/LF back (a name with CRLF can't forge a reply).
        c = self.raw()
        reply = c.call("BAD\r\n+OK", "x")
        self.assertIsInstance(reply, Err)
        self.assertEqual(c.call("PING"), b"PONG")

    # ---- server -----------------------------------------------------------

    def test_config_resetstat_zeroes_stats_but_not_unsaved_changes(self):
        for i in range(50):
            self.r.execute_command("BF.ADD", "rs", "item%d" % i)
            self.r.execute_command("BF.EXISTS", "rs", "item%d" % i)
        self.assertGreaterEqual(int(self.info_section("stats")["total_commands_processed"]), 100)
        unsaved = int(self.info_section("persistence")["rdb_changes_since_last_save"])
        self.assertGreaterEqual(unsaved, 50)
        self.assertTrue(self.r.config_resetstat())
        stats = self.info_section("stats")
        # Only the INFO that reads them (and nothing else) has run since.
        self.assertEqual(int(stats["total_commands_processed"]), 1)
        self.assertEqual(int(stats["keyspace_hits"]), 0)
        self.assertEqual(int(self.info_section("persistence")["rdb_changes_since_last_save"]), unsaved)

    def test_flushall_flushdb(self):
        for i in range(20):
            self.r.execute_command("BF.ADD", "f%d" % i, "x")
        self.r.expire("f0", 100)
        self.assertTrue(self.r.flushdb())
        self.assertEqual(self.r.dbsize(), 0)
        self.assertEqual(self.r.ttl("f0"), -2)
        self.r.execute_command("BF.ADD", "g", "x")
        self.assertTrue(self.r.flushall())
        self.assertEqual(self.r.dbsize(), 0)
        self.r.execute_command("BF.ADD", "g", "x")
        self.assertTrue(self.r.execute_command("FLUSHALL", "ASYNC"))
        self.assertEqual(self.r.dbsize(), 0)
        self.r.execute_command("BF.ADD", "g", "x")
        self.assertTrue(self.r.execute_command("FLUSHDB", "SYNC"))
        self.assertEqual(self.r.dbsize(), 0)
        self.assertEqual(self.r.execute_command("BF.EXISTS", "g", "x"), 0)
        self.assertTrue(self.error_of("FLUSHALL", "BOGUS").startswith("ERR"))

    def test_time(self):
        reply = self.raw().call("TIME")
        self.assertEqual(len(reply), 2)
        seconds, micros = int(reply[0]), int(reply[1])
        self.assertLess(abs(seconds - time.time()), 60)  # the same clock, read a moment apart
        self.assertTrue(0 <= micros < 1000000)

    def test_client_id_name_list(self):
        r1 = self.server.client()
        self.addCleanup(r1.close)
        id1 = r1.client_id()
        self.assertIsInstance(id1, int)
        self.assertIsNone(r1.client_getname())
        self.assertTrue(r1.client_setname("worker-one"))
        self.assertEqual(r1.client_getname(), "worker-one")
        id_self = self.r.client_id()
        self.assertNotEqual(id1, id_self)
        listing = self.r.execute_command("CLIENT", "LIST").decode()
        lines = [line for line in listing.splitlines() if line]
        self.assertGreaterEqual(len(lines), 2)
        by_id = {}
        for line in lines:
            fields = dict(f.split("=", 1) for f in line.split(" ") if "=" in f)
            by_id[int(fields["id"])] = fields
        self.assertIn(id1, by_id)
        self.assertEqual(by_id[id1]["name"], "worker-one")
        self.assertIn(id_self, by_id)
        self.assertEqual(by_id[id_self]["cmd"], "client|list")
        self.assertTrue(self.error_of("CLIENT", "SETNAME", "has space").startswith("ERR"))
        self.assertTrue(self.error_of("CLIENT", "NOSUCHSUB").startswith("ERR"))
        # CLIENT LIST ID filters.
        only = self.r.execute_command("CLIENT", "LIST", "ID", str(id1)).decode().strip().splitlines()
        self.assertEqual(len(only), 1)
        self.assertIn("name=worker-one", only[0])
        # Setting an empty name clears it.
        self.assertTrue(r1.client_setname(""))
        self.assertIsNone(r1.client_getname())

    def test_config_get(self):
        # The harness passes --save '""' (periodic snapshots off).
        self.assertIn(self.r.config_get("save"), ({"save": ""}, {"save": '""'}))
        # The journal is on by default, with everysec (README "Durability").
        self.assertEqual(self.r.config_get("appendonly"), {"appendonly": "yes"})
        self.assertEqual(self.r.config_get("appendfsync"), {"appendfsync": "everysec"})
        everything = self.r.config_get("*")
        self.assertIn("save", everything)
        self.assertIn("appendonly", everything)
        self.assertEqual(everything["port"], str(self.server.port))
        self.assertEqual(everything["maxclients"], "10000")
        self.assertEqual(self.r.config_get("nosuchparam"), {})
        both = self.raw().call("CONFIG", "GET", "save", "appendonly")
        self.assertEqual(len(both), 4)
        self.assertEqual(self.r.config_get("max*"), {k: v for k, v in everything.items() if k.startswith("max")})

    def test_info_sections(self):
        server = self.info_section("server")
        self.assertIn("redis_version", server)
        self.assertIn("bloomery_version", server)
        self.assertEqual(server["tcp_port"], str(self.server.port))
        self.assertEqual(int(server["process_id"]), self.server.process.pid)
        clients = self.info_section("clients")
        self.assertGreaterEqual(int(clients["connected_clients"]), 1)
        memory = self.info_section("memory")
        self.assertIn("used_memory", memory)
        used_before = int(memory["used_memory"])
        self.r.execute_command("BF.RESERVE", "mem", "0.001", "1000000")
        used_after = int(self.info_section("memory")["used_memory"])
        self.assertGreater(used_after - used_before, 1000000)  # ~1.8 MB of bits
        stats = self.info_section("stats")
        self.assertIn("instantaneous_ops_per_sec", stats)
        n1 = int(stats["total_commands_processed"])
        for _ in range(10):
            self.r.ping()
        n2 = int(self.info_section("stats")["total_commands_processed"])
        self.assertGreaterEqual(n2 - n1, 10)
        persistence = self.info_section("persistence")
        for field in ("rdb_changes_since_last_save", "rdb_bgsave_in_progress", "rdb_last_save_time",
                      "rdb_last_bgsave_status", "loading"):
            self.assertIn(field, persistence)
        changes = int(persistence["rdb_changes_since_last_save"])
        self.r.execute_command("BF.MADD", "chg", "a", "b", "c")
        self.assertGreater(int(self.info_section("persistence")["rdb_changes_since_last_save"]), changes)
        # Keyspace.
        self.r.flushall()
        self.assertNotIn("db0", self.info_section("keyspace"))
        for i in range(7):
            self.r.execute_command("BF.ADD", "ks%d" % i, "x")
        self.r.expire("ks0", 100)
        self.r.expire("ks1", 100)
        db0 = self.info_section("keyspace")["db0"]
        self.assertTrue(db0.startswith("keys=7,expires=2"), db0)
        # All sections at once, and "everything", and several names.
        text = self.raw().call("INFO").decode()
        for header in ("# Server", "# Clients", "# Memory", "# Persistence", "# Stats", "# Keyspace"):
            self.assertIn(header, text)
        self.assertIn("# Server", self.raw().call("INFO", "all").decode())
        multi = self.raw().call("INFO", "server", "clients").decode()
        self.assertIn("# Server", multi)
        self.assertIn("# Clients", multi)
        self.assertNotIn("# Memory", multi)
        self.assertEqual(self.raw().call("INFO", "nosuchsection"), b"")

    # ---- Redis semantics at the edges ---------------------------------------

    def test_integer_arguments_follow_redis_string2ll(self):
        # PEXPIREAT on a missing key answers 0 for any integer.
        for text in ("0", "-1", "9223372036854775807", "-9223372036854775808"):
            self.assertEqual(self.raw().call("PEXPIREAT", "missing", text), 0, text)
        for text in ("007", "-0", "+1", " 1", "", "9223372036854775808",
                     "-9223372036854775809"):
            self.assertEqual(self.error_of("PEXPIREAT", "missing", text),
                             "ERR value is not an integer or out of range", repr(text))

    def test_expire_at_the_int64_extremes_answers_as_redis(self):
        def expire(command, amount):
            self.r.delete("k")
            self.r.execute_command("BF.ADD", "k", "x")
            reply = self.raw().call(command, "k", amount)
            return reply if isinstance(reply, int) else reply.decode(), self.r.exists("k")

        low, high = "-9223372036854775808", "9223372036854775807"
        # (reply, whether the key is still there), as Redis 7.0 answers.
        self.assertEqual(expire("PEXPIRE", low), (1, 0))
        self.assertEqual(expire("PEXPIREAT", low), (1, 0))
        self.assertEqual(expire("EXPIRE", low), ("ERR invalid expire time in 'expire' command", 1))
        self.assertEqual(expire("EXPIREAT", low), ("ERR invalid expire time in 'expireat' command", 1))
        self.assertEqual(expire("PEXPIRE", high), ("ERR invalid expire time in 'pexpire' command", 1))
        self.assertEqual(expire("PEXPIREAT", high), (1, 1))
        self.assertEqual(expire("EXPIREAT", "9223372036854775"), (1, 1))
        self.assertEqual(expire("EXPIRE", "-9223372036854775"), (1, 0))

    def test_client_kill_skips_the_caller_unless_skipme_no_or_the_old_form(self):
        def connect():
            c = self.raw()
            client_id = c.call("CLIENT", "ID")
            info = c.call("CLIENT", "INFO").decode()
            address = dict(f.split("=", 1) for f in info.split() if "=" in f)["addr"]
            return c, client_id, address

        def closed(c):
            try:
                c.call("PING")
            except (ConnectionError, OSError):
                return True
            return False

        c, client_id, address = connect()
        self.assertEqual(c.call("CLIENT", "KILL", "ID", str(client_id)), 0)
        self.assertEqual(c.call("CLIENT", "KILL", "ADDR", address, "SKIPME", "yes"), 0)
        self.assertEqual(c.call("PING"), b"PONG")
        self.assertEqual(c.call("CLIENT", "KILL", "ID", str(client_id), "SKIPME", "no"), 1)
        self.assertTrue(closed(c))

        c, client_id, address = connect()
        self.assertEqual(c.call("CLIENT", "KILL", address), b"OK")  # the old form kills itself
        self.assertTrue(closed(c))

        # Another client is killed by ID; filters must all match.
        c, client_id, address = connect()
        other = self.raw()
        self.assertEqual(other.call("CLIENT", "KILL", "ID", str(client_id), "ADDR", "1.2.3.4:5"), 0)
        self.assertEqual(other.call("CLIENT", "KILL", "ID", str(client_id), "ADDR", address), 1)
        self.assertTrue(closed(c))
        self.assertEqual(other.call("PING"), b"PONG")
        self.assertEqual(self.error_of("CLIENT", "KILL", "ID", "0"),
                         "ERR client-id should be greater than 0")
        self.assertEqual(self.error_of("CLIENT", "KILL", "ID", "1", "SKIPME", "maybe"),
                         "ERR syntax error")

    def blocked_clients(self):
        return int(self.info_section("clients")["blocked_clients"])

    def wait_for_blocked_clients(self, expected):
        harness.wait_until(lambda: self.blocked_clients() == expected, 10,
                           lambda: "blocked_clients %d (it stayed at %d)" %
                           (expected, self.blocked_clients()), interval=0.01)

    def test_blocked_clients_counts_clients_in_wait(self):
        self.assertEqual(self.blocked_clients(), 0)
        # No replica will ever acknowledge: WAIT 1 0 waits until the client goes.
        waiter = self.raw()
        waiter_id = waiter.call("CLIENT", "ID")
        waiter.send(encode("WAIT", "1", "0"))
        self.wait_for_blocked_clients(1)
        flags = self.raw().call("CLIENT", "LIST", "ID", str(waiter_id)).decode()
        self.assertIn("flags=b", flags)
        self.assertEqual(self.raw().call("CLIENT", "KILL", "ID", str(waiter_id)), 1)
        self.wait_for_blocked_clients(0)
        # A WAIT whose timeout passes unblocks its client too.
        timed = self.raw()
        self.assertEqual(timed.call("WAIT", "1", "50"), 0)
        self.assertEqual(self.blocked_clients(), 0)

    # ---- COMMAND ----------------------------------------------------------

    def test_command_count_info_docs_getkeys(self):
        with open(COMMANDS_JSON) as f:
            table = json.load(f)["commands"]
        c = self.raw()
        self.assertEqual(c.call("COMMAND", "COUNT"), len(table))
        info = c.call("COMMAND", "INFO", "bf.add")
        self.assertEqual(len(info), 1)
        entry = info[0]
        self.assertEqual(entry[0], b"bf.add")
        self.assertEqual(entry[1], 3)
        self.assertIn(b"write", entry[2])
        self.assertEqual(entry[3:6], [1, 1, 1])
        self.assertEqual(c.call("COMMAND", "INFO", "nosuch"), [None])
        self.assertEqual(len(c.call("COMMAND", "INFO", "BF.ADD", "ping")), 2)
        docs = c.call("COMMAND", "DOCS", "bf.add")
        self.assertEqual(docs[0], b"bf.add")
        doc = dict(zip(docs[1][::2], docs[1][1::2]))
        self.assertIn(b"summary", doc)
        self.assertGreater(len(doc[b"summary"]), 10)
        self.assertIn(b"arguments", doc)
        self.assertEqual(c.call("COMMAND", "GETKEYS", "bf.add", "mykey", "item"), [b"mykey"])
        self.assertEqual(c.call("COMMAND", "GETKEYS", "del", "a", "b", "c"), [b"a", b"b", b"c"])
        self.assertEqual(c.call("COMMAND", "GETKEYS", "rename", "a", "b"), [b"a", b"b"])
        self.assertIsInstance(c.call("COMMAND", "GETKEYS", "ping"), Err)
        self.assertIsInstance(c.call("COMMAND", "GETKEYS", "nosuch", "a"), Err)
        full = c.call("COMMAND")
        self.assertEqual(len(full), len(table))

    def test_every_command_in_commands_json_matches_command_info(self):
        with open(COMMANDS_JSON) as f:
            table = json.load(f)["commands"]
        self.assertGreater(len(table), 30)
        c = self.raw()
        names = [cmd["name"] for cmd in table]
        replies = c.call("COMMAND", "INFO", *names)
        self.assertEqual(len(replies), len(table))
        for cmd, entry in zip(table, replies):
            self.assertIsNotNone(entry, cmd["name"])
            self.assertEqual(entry[0].decode(), cmd["name"])
            self.assertEqual(entry[1], cmd["arity"], cmd["name"])
            self.assertEqual(entry[3:6], [cmd["first_key"], cmd["last_key"], cmd["step"]], cmd["name"])
            self.assertEqual(sorted(x.decode() for x in entry[2]), sorted(cmd["flags"]), cmd["name"])
            # Upper case lookups work as well.
            self.assertEqual(c.call("COMMAND", "INFO", cmd["name"].upper())[0][1], cmd["arity"])
            # And the server's arity check agrees with the table: one argument
            # short of the minimum is refused with Redis's text.
            minimum = abs(cmd["arity"])
            if minimum >= 2 and cmd["name"] not in ("quit",):
                args = [cmd["name"]] + ["x"] * (minimum - 2)
                reply = c.call(*args)
                self.assertIsInstance(reply, Err, cmd["name"])
                self.assertEqual(reply.decode(),
                                 "ERR wrong number of arguments for '%s' command" % cmd["name"])
            self.assertEqual(c.call("PING"), b"PONG")

    # ---- redis-cli --------------------------------------------------------

    def cli(self, *args, stdin_data=None):
        out = run_tool(["redis-cli", "-p", str(self.server.port)] + list(args), stdin_data=stdin_data)
        self.assertEqual(out.returncode, 0, out.stderr)
        return out.stdout.decode()

    def test_redis_cli_basic_output(self):
        self.assertEqual(self.cli("BF.ADD", "k", "a"), "1\n")
        self.assertEqual(self.cli("BF.ADD", "k", "a"), "0\n")
        self.assertEqual(self.cli("--no-raw", "BF.EXISTS", "k", "a"), "(integer) 1\n")
        self.assertEqual(self.cli("--no-raw", "BF.MEXISTS", "k", "a", "b"), "1) (integer) 1\n2) (integer) 0\n")
        self.assertEqual(self.cli("PING"), "PONG\n")
        self.assertEqual(self.cli("BF.INFO", "k", "CAPACITY"), "100\n")
        err = self.cli("BF.INFO", "missing")
        self.assertIn("ERR not found", err)
        self.assertEqual(self.cli("--no-raw", "TYPE", "k"), "MBbloom--\n")
        self.assertEqual(self.cli("DBSIZE"), "1\n")

    def test_redis_cli_commands_from_stdin(self):
        script = b"BF.ADD s one\nBF.ADD s two\nBF.ADD s one\nBF.EXISTS s two\nBF.EXISTS s three\nDBSIZE\n"
        self.assertEqual(self.cli(stdin_data=script), "1\n1\n0\n1\n0\n1\n")

    def test_redis_cli_pipe_mass_insertion(self):
        stream = b"".join(encode("BF.ADD", "mass", "item-%d" % i) for i in range(10000))
        with tempfile.TemporaryFile() as f:
            f.write(stream)
            f.seek(0)
            out = subprocess.run(["redis-cli", "-p", str(self.server.port), "--pipe"], stdin=f,
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60, check=False)
        text = out.stdout.decode()
        self.assertEqual(out.returncode, 0, text)
        self.assertIn("errors: 0, replies: 10000", text)
        card = self.r.execute_command("BF.CARD", "mass")
        self.assertTrue(9500 <= card <= 10500, card)
        self.assertEqual(self.r.execute_command("BF.MEXISTS", "mass", *["item-%d" % i for i in range(0, 10000, 7)]),
                         [1] * len(range(0, 10000, 7)))

    def test_redis_benchmark_sanity(self):
        out = run_tool(["redis-benchmark", "-p", str(self.server.port), "-t", "ping", "-n", "2000", "-q"],
                       timeout=60)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn(b"requests per second", out.stdout)
        out = run_tool(["redis-benchmark", "-p", str(self.server.port), "-n", "2000", "-r", "100000", "-q",
                        "BF.ADD", "bench", "__rand_int__"], timeout=60)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn(b"requests per second", out.stdout)
        self.assertGreater(self.r.execute_command("BF.INFO", "bench", "ITEMS")[0], 1000)
        self.assertTrue(self.r.ping())


class OptionRangesTest(unittest.TestCase):
    """Every numeric option has a range; values past it refuse the start."""

    def start(self, *args, expect_failure=False):
        server = harness.Server(*args)
        self.addCleanup(server.cleanup)
        server.start(expect_failure=expect_failure)
        return server

    def test_auto_aof_rewrite_percentage_takes_redis_range(self):
        server = self.start("--auto-aof-rewrite-percentage", "2147483647")
        self.assertEqual(server.client().config_get("auto-aof-rewrite-percentage"),
                         {"auto-aof-rewrite-percentage": "2147483647"})
        for value in ("2147483648", "-1", "18446744073709551615"):
            refused = self.start("--auto-aof-rewrite-percentage", value, expect_failure=True)
            self.assertIsNotNone(refused.process.poll(), "started with %s" % value)
            self.assertNotEqual(refused.wait(), 0)
            self.assertIn("--auto-aof-rewrite-percentage", refused.log())
            self.assertIn("between 0 and 2147483647 inclusive", refused.log())

    def test_config_get_shows_a_small_error_rate_exactly(self):
        server = self.start("--bf-error-rate", "1e-9")
        self.assertEqual(server.client().config_get("bf-error-rate"), {"bf-error-rate": "1e-09"})


class ReplicaSemanticsTest(unittest.TestCase):
    """What clients of a replica see while it loads its primary's snapshot."""

    def start(self, server):
        self.addCleanup(server.cleanup)
        return server.start(timeout=60)

    def test_info_says_loading_while_the_snapshot_loads_and_hello_says_replica(self):
        primary = self.start(harness.Server())
        # About 240 MB of bits, 300,000 items at 50 hashes each: a third of
        # the words are not zero, so the copy (which holds only those) takes
        # a while to load, and INFO answers meanwhile (the load runs on the
        # replication thread).
        p = primary.client()
        p.execute_command("BF.RESERVE", "big", "1e-15", "26700000", "NONSCALING", "LAYOUT",
                          "CLASSIC")
        harness.add_range(p, "big", 0, 300000)
        replica = self.start(harness.Server("--replicaof", "127.0.0.1 %d" % primary.port))
        c = RespConnection(replica.port)
        self.addCleanup(c.close)
        seen_loading = False

        def synchronized():
            nonlocal seen_loading
            text = c.call("INFO", "persistence", "replication").decode()
            seen_loading = seen_loading or "\r\nloading:1\r\n" in text
            return "master_link_status:up" in text
        # Polled without a pause, so the loading state is seen however short.
        harness.wait_until(synchronized, 120, "the replica to synchronize", interval=0)
        self.assertTrue(seen_loading, "INFO never said loading:1")
        self.assertIn("\r\nloading:0\r\n", c.call("INFO", "persistence").decode())
        hello = c.call("HELLO", "2")
        fields = dict(zip(hello[::2], hello[1::2]))
        self.assertEqual(fields[b"role"], b"replica")
        primary_hello = RespConnection(primary.port)
        self.addCleanup(primary_hello.close)
        hello = primary_hello.call("HELLO", "2")
        self.assertEqual(dict(zip(hello[::2], hello[1::2]))[b"role"], b"master")

if __name__ == "__main__":
    unittest.main()
