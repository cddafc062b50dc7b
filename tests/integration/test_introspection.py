"""MEMORY, OBJECT, LATENCY, BF.DEBUG, INFO's errorstats / modules sections,
HELLO's module list and client-output-buffer-limit, on the real server
through redis-py and raw sockets, with Redis 7's replies.
"""

import os
import re
import socket
import subprocess
import time
import unittest

import redis

import harness
from test_protocol import Err, RespConnection


def used_memory(client):
    return client.info("memory")["used_memory"]


def stable_used_memory(client):
    """used_memory once two reads in a row agree (freed nodes and filters go
    once no lookup can still see them, a moment after a DEL)."""
    previous = None

    def settled():
        nonlocal previous
        now = used_memory(client)
        if now == previous:
            return now
        previous = now
        return None
    return harness.wait_until(settled, 30, "used_memory to settle", interval=0.05)


class MemoryUsageTest(unittest.TestCase):
    """MEMORY USAGE is what used_memory counts for the key."""

    @classmethod
    def setUpClass(cls):
        # No journal: its buffers would move used_memory under the test.
        cls.server = harness.Server("--appendonly", "no", threads=1)
        cls.server.start()

    @classmethod
    def tearDownClass(cls):
        cls.server.cleanup()

    def setUp(self):
        self.r = self.server.client()
        self.addCleanup(self.r.close)
        self.r.flushall()
        # A connection keeps room for the arguments of its largest command
        # (up to 256): made once here, it does not move used_memory below.
        self.r.execute_command("BF.MEXISTS", "none", *["x"] * 16)

    def test_a_large_filter_is_its_used_memory_delta(self):
        for layout in ("CLASSIC", "BLOCKED"):
            key = "big-" + layout
            before = stable_used_memory(self.r)
            self.r.execute_command("BF.RESERVE", key, "0.001", "1000000", "LAYOUT", layout)
            after = stable_used_memory(self.r)
            usage = self.r.memory_usage(key)
            size = self.r.execute_command("BF.INFO", key, "SIZE")[0]
            # The filter, plus its node (24 bytes and the key) and table slot.
            self.assertEqual(usage, size + 24 + len(key) + 8)
            # The delta is the same, but for the table the first key of a
            # shard allocates (eight slots and a header).
            self.assertLessEqual(abs((after - before) - usage), 80, layout)
            self.assertGreater(usage, 1700000)
            self.r.delete(key)
            self.assertLessEqual(abs(stable_used_memory(self.r) - before), 80)

    def test_growth_shows_in_memory_usage(self):
        self.r.execute_command("BF.RESERVE", "g", "0.01", "1000")
        first = self.r.memory_usage("g")
        self.r.execute_command("BF.MADD", "g", *["i%d" % i for i in range(3000)])
        self.assertGreater(self.r.execute_command("BF.INFO", "g", "FILTERS")[0], 1)
        size = self.r.execute_command("BF.INFO", "g", "SIZE")[0]
        self.assertEqual(self.r.memory_usage("g"), size + 24 + 1 + 8)
        self.assertGreater(self.r.memory_usage("g"), first)

    def test_many_small_keys_sum_to_the_delta(self):
        before = stable_used_memory(self.r)
        keys = ["key:%d" % i for i in range(2000)]
        pipe = self.r.pipeline(transaction=False)
        for key in keys:
            pipe.execute_command("BF.ADD", key, "x")
        pipe.execute()
        delta = stable_used_memory(self.r) - before
        usages = [self.r.memory_usage(key) for key in keys]
        total = sum(usages)
        # The rest is the tables' empty slots: at most 1/0.8 slots per key,
        # tables doubling, 64 shards.
        self.assertLessEqual(total, delta)
        self.assertLess(delta - total, 2000 * 8 * 3 + 64 * 80)
        # The same filter each; the entries differ by their key's length.
        self.assertEqual({u - len(k) for u, k in zip(usages, keys)}, {usages[0] - len(keys[0])})

    def test_options_and_missing_keys_as_redis(self):
        self.r.execute_command("BF.ADD", "k", "a")
        usage = self.r.memory_usage("k")
        self.assertEqual(self.r.execute_command("MEMORY", "USAGE", "k", "SAMPLES", "0"), usage)
        self.assertEqual(self.r.execute_command("MEMORY", "USAGE", "k", "samples", "99"), usage)
        self.assertIsNone(self.r.memory_usage("missing"))
        c = RespConnection(self.server.port)
        self.addCleanup(c.close)
        self.assertEqual(c.call("MEMORY", "USAGE", "k", "SAMPLES"), Err(b"ERR syntax error"))
        self.assertEqual(c.call("MEMORY", "USAGE", "k", "SAMPLES", "-1"), Err(b"ERR syntax error"))
        self.assertEqual(c.call("MEMORY", "USAGE", "missing", "SAMPLES", "x"),
                         Err(b"ERR value is not an integer or out of range"))
        self.assertEqual(c.call("MEMORY", "USAGE", "missing", "BOGUS"), Err(b"ERR syntax error"))

    def test_stats_doctor_purge_malloc_stats_and_help(self):
        self.r.execute_command("BF.RESERVE", "t", "0.01", "1000")
        self.r.expire("t", 1000)
        stats = self.r.memory_stats()
        for field in ("peak.allocated", "total.allocated", "startup.allocated",
                      "replication.backlog", "clients.slaves", "clients.normal", "cluster.links",
                      "aof.buffer", "lua.caches", "functions.caches", "overhead.total",
                      "keys.count", "keys.bytes-per-key", "dataset.bytes", "dataset.percentage",
                      "peak.percentage", "allocator.allocated", "allocator.active",
                      "allocator.resident", "allocator-fragmentation.ratio",
                      "allocator-fragmentation.bytes", "allocator-rss.ratio",
                      "allocator-rss.bytes", "rss-overhead.ratio", "rss-overhead.bytes",
                      "fragmentation", "fragmentation.bytes"):
            self.assertIn(field, stats)
        self.assertEqual(len(stats), 28)
        self.assertEqual(stats["keys.count"], 1)
        db = stats["db.0"]
        self.assertGreater(db["overhead.hashtable.main"], 0)
        self.assertGreater(db["overhead.hashtable.expires"], 0)
        self.assertEqual(db["overhead.hashtable.slot-to-keys"], 0)
        info = self.r.info("memory")
        self.assertLessEqual(stats["total.allocated"] - info["used_memory"], 4096)
        self.assertEqual(stats["dataset.bytes"] + stats["overhead.total"],
                         stats["total.allocated"])
        # The release build links jemalloc (sanitizer builds run on their
        # own malloc, which has no such report).
        malloc_stats = self.r.execute_command("MEMORY", "MALLOC-STATS").decode()
        if info["mem_allocator"].startswith("jemalloc"):
            self.assertIn("jemalloc statistics", malloc_stats)
        else:
            self.assertEqual(malloc_stats, "Stats not supported for the current allocator")
        self.assertTrue(self.r.execute_command("MEMORY", "PURGE"))
        doctor = self.r.execute_command("MEMORY", "DOCTOR").decode()
        self.assertIn("less than 5 MB", doctor)
        self.r.execute_command("BF.RESERVE", "big", "0.0001", "3000000")
        doctor = self.r.execute_command("MEMORY", "DOCTOR").decode()
        self.assertTrue(doctor.startswith(("No memory issue", "Memory issues found")), doctor)
        help_lines = [line.decode() for line in self.r.execute_command("MEMORY", "HELP")]
        self.assertTrue(help_lines[0].startswith("MEMORY <subcommand>"))
        self.assertIn("USAGE <key> [SAMPLES <count>]", help_lines)
        self.r.delete("t")
        stats = self.r.memory_stats()
        self.r.delete("big")
        self.assertEqual(len(self.r.memory_stats()), 27)  # no db.0 without keys


class ObjectTest(harness.SharedServerTestCase):

    def setUp(self):
        self.r = self.server.client()
        self.addCleanup(self.r.close)
        self.r.flushall()

    def idle(self, key):
        return self.r.object("idletime", key)

    def wait_idle(self, key, seconds):
        harness.wait_until(lambda: self.idle(key) >= seconds, timeout=30,
                           what="%s idle for %d s" % (key, seconds))

    def test_encoding_refcount_freq_on_a_filter_and_a_missing_key(self):
        self.r.execute_command("BF.ADD", "k", "a")
        self.assertEqual(self.r.object("encoding", "k"), b"raw")
        self.assertEqual(self.r.object("refcount", "k"), 1)
        # A new key's counter is Redis's initial 5, once used 6; OBJECT is
        # no use of it.
        self.assertEqual(self.r.object("freq", "k"), 6)
        self.assertEqual(self.r.object("freq", "k"), 6)
        for sub in ("encoding", "refcount", "idletime", "freq"):
            self.assertIsNone(self.r.object(sub, "missing"), sub)
        c = RespConnection(self.server.port)
        self.addCleanup(c.close)
        help_lines = c.call("OBJECT", "HELP")
        self.assertTrue(help_lines[0].startswith(b"OBJECT <subcommand>"))
        self.assertIn(b"IDLETIME <key>", help_lines)

    def test_freq_grows_logarithmically_with_use_and_decays_without(self):
        self.r.execute_command("BF.ADD", "hot", "a")
        self.r.execute_command("BF.ADD", "cold", "a")
        pipe = self.r.pipeline(transaction=False)
        for _ in range(1000):
            pipe.execute_command("BF.EXISTS", "hot", "a")
        pipe.execute()
        # redis.conf's table for lfu-log-factor 10: about 18 after 1,000 uses
        # (one fewer each minute boundary crossed meanwhile).
        self.assertGreaterEqual(self.r.object("freq", "hot"), 12)
        self.assertLessEqual(self.r.object("freq", "hot"), 24)
        self.assertLessEqual(self.r.object("freq", "cold"), 6)
        # lfu-log-factor 0 counts every use, up to 255.
        self.r.config_set("lfu-log-factor", 0)
        self.r.config_set("lfu-decay-time", 0)
        self.addCleanup(self.r.config_set, "lfu-log-factor", 10)
        self.addCleanup(self.r.config_set, "lfu-decay-time", 1)
        before = self.r.object("freq", "cold")
        for _ in range(7):
            self.r.execute_command("BF.EXISTS", "cold", "a")
        self.assertEqual(self.r.object("freq", "cold"), before + 7)
        pipe = self.r.pipeline(transaction=False)
        for _ in range(300):
            pipe.execute_command("BF.EXISTS", "cold", "a")
        pipe.execute()
        self.assertEqual(self.r.object("freq", "cold"), 255)
        self.assertEqual(self.r.config_get("lfu-*"),
                         {"lfu-log-factor": "0", "lfu-decay-time": "0"})

    def test_redis_cli_hotkeys_memkeys_and_bigkeys_run_without_errors(self):
        for i in range(20):
            self.r.execute_command("BF.ADD", "k%d" % i, "a")
        self.r.execute_command("BF.RESERVE", "big", 0.001, 100000)
        pipe = self.r.pipeline(transaction=False)
        for _ in range(300):
            pipe.execute_command("BF.EXISTS", "k7", "a")
        pipe.execute()
        outputs = {}
        for option in ("--hotkeys", "--memkeys", "--bigkeys"):
            result = subprocess.run(["redis-cli", "-h", "127.0.0.1", "-p", str(self.server.port),
                                     option], capture_output=True, timeout=60)
            self.assertEqual(result.returncode, 0, (option, result.stdout, result.stderr))
            text = result.stdout.decode()
            self.assertNotIn("ERR", text + result.stderr.decode(), option)
            self.assertIn("Sampled 21 keys in the keyspace!", text, option)
            outputs[option] = text
        # The key used most ranks first; the biggest filter is the largest.
        hot = re.findall(r'hot key found with counter: (\d+)\tkeyname: "?([^"\n]+)"?',
                         outputs["--hotkeys"])
        self.assertEqual(hot[0][1], "k7", outputs["--hotkeys"])
        self.assertGreater(int(hot[0][0]), int(hot[1][0]))
        self.assertRegex(outputs["--memkeys"], r"Biggest MBbloom-- found '\"?big\"?' has \d+ bytes")
        self.assertIn("21 MBbloom--s with", outputs["--memkeys"])
        self.assertIn("21 MBbloom--s with", outputs["--bigkeys"])

    def test_idletime_counts_from_the_last_command_that_used_the_key(self):
        self.r.execute_command("BF.ADD", "k", "a")
        self.assertLessEqual(self.idle("k"), 1)
        self.wait_idle("k", 2)
        # Looking at a key is not using it (Redis's LOOKUP_NOTOUCH).
        self.r.exists("k")
        self.r.type("k")
        self.r.ttl("k")
        self.r.object("encoding", "k")
        self.r.memory_usage("k")
        self.assertGreaterEqual(self.idle("k"), 2)
        # A BF.* command uses it; a RENAME keeps its idle time.
        self.r.execute_command("BF.EXISTS", "k", "a")
        self.assertLessEqual(self.idle("k"), 1)
        self.wait_idle("k", 2)
        self.r.rename("k", "k2")
        self.assertGreaterEqual(self.idle("k2"), 2)
        self.r.execute_command("BF.MADD", "k2", "b")
        self.assertLessEqual(self.idle("k2"), 1)


class LatencyTest(unittest.TestCase):

    def start(self, *args):
        server = harness.Server(*args, threads=2)
        server.start()
        self.addCleanup(server.cleanup)
        r = server.client()
        self.addCleanup(r.close)
        return server, r

    def test_off_by_default_and_nothing_recorded(self):
        _, r = self.start()
        self.assertEqual(r.config_get("latency-monitor-threshold"),
                         {"latency-monitor-threshold": "0"})
        r.execute_command("BF.MADD", "k", *["i%d" % i for i in range(100000)])
        self.assertEqual(r.execute_command("LATENCY", "LATEST"), [])
        self.assertEqual(r.execute_command("LATENCY", "HISTORY", "fast-command"), [])
        self.assertIn(b"Latency monitoring is off", r.execute_command("LATENCY", "DOCTOR"))

    def test_events_past_the_threshold_are_recorded_and_reset(self):
        server, r = self.start("--latency-monitor-threshold", "1")
        self.assertEqual(r.config_get("latency-monitor-threshold"),
                         {"latency-monitor-threshold": "1"})
        # 200,000 adds take milliseconds on any machine.
        r.execute_command("BF.MADD", "k", *["i%d" % i for i in range(200000)])
        # A snapshot of a 30 MB filter takes milliseconds too.
        r.execute_command("BF.RESERVE", "big", "0.0001", "1500000", "LAYOUT", "CLASSIC")
        r.execute_command("SAVE")
        latest = {e[0].decode(): e[1:] for e in r.execute_command("LATENCY", "LATEST")}
        self.assertIn("fast-command", latest)  # BF.MADD has the fast flag
        self.assertIn("snapshot", latest)
        when, latency, worst = latest["fast-command"]
        self.assertLessEqual(abs(when - time.time()), 60)
        self.assertGreaterEqual(latency, 1)
        self.assertGreaterEqual(worst, latency)
        history = r.execute_command("LATENCY", "HISTORY", "fast-command")
        self.assertGreaterEqual(len(history), 1)
        self.assertEqual(history[-1], [when, latency])
        graph = r.execute_command("LATENCY", "GRAPH", "fast-command").decode()
        self.assertRegex(graph, r"\Afast-command - high \d+ ms, low \d+ ms \(all time high \d+ ms\)\n-{80}\n")
        self.assertRegex(graph, r"[_o#|]")
        doctor = r.execute_command("LATENCY", "DOCTOR").decode()
        self.assertIn("fast-command", doctor)
        self.assertIn("snapshot", doctor)
        histogram = r.execute_command("LATENCY", "HISTOGRAM", "bf.madd")
        self.assertEqual(histogram[0], b"bf.madd")
        entry = dict(zip(histogram[1][::2], histogram[1][1::2]))
        self.assertEqual(entry[b"calls"], 1)
        self.assertEqual(entry[b"histogram_usec"][-1], 1)  # cumulative: the last bucket has it
        # CONFIG SET turns it off; RESET forgets.
        self.assertTrue(r.config_set("latency-monitor-threshold", 0))
        self.assertEqual(r.execute_command("LATENCY", "RESET", "fast-command", "nothing"), 1)
        # The snapshot's (and maybe its fsync's, and the journal's) stay.
        left = [e[0] for e in r.execute_command("LATENCY", "LATEST")]
        self.assertIn(b"snapshot", left)
        self.assertNotIn(b"fast-command", left)
        self.assertEqual(r.execute_command("LATENCY", "RESET"), len(left))
        self.assertEqual(r.execute_command("LATENCY", "LATEST"), [])
        c = RespConnection(server.port)
        self.addCleanup(c.close)
        self.assertEqual(c.call("LATENCY", "GRAPH", "fast-command"),
                         Err(b"ERR No samples available for event 'fast-command'"))
        self.assertEqual(c.call("CONFIG", "SET", "latency-monitor-threshold", "-1"),
                         Err(b"ERR CONFIG SET failed (possibly related to argument "
                             b"'latency-monitor-threshold') - argument must be between 0 and "
                             b"9223372036854775807 inclusive"))


class InfoSectionsTest(harness.SharedServerTestCase):

    def setUp(self):
        self.r = self.server.client()
        self.addCleanup(self.r.close)
        self.r.flushall()
        self.r.config_resetstat()

    def info_text(self, *sections):
        c = RespConnection(self.server.port)
        self.addCleanup(c.close)
        return c.call("INFO", *sections).decode()

    def test_default_sections_in_redis_order_with_modules_and_errorstats(self):
        text = self.info_text()
        self.assertEqual(re.findall(r"^# (\w+)", text, re.M),
                         ["Server", "Clients", "Memory", "Persistence", "Stats", "Replication",
                          "CPU", "Modules", "Errorstats", "Cluster", "Keyspace"])
        everything = self.info_text("everything")
        self.assertEqual(re.findall(r"^# (\w+)", everything, re.M),
                         ["Server", "Clients", "Memory", "Persistence", "Stats", "Replication",
                          "CPU", "Modules", "Commandstats", "Errorstats", "Latencystats",
                          "Cluster", "Keyspace"])
        self.assertIn("\r\nmodule:name=bf,ver=20423,api=1,filters=0,usedby=[],using=[],"
                      "options=[handle-io-errors]\r\n", text)
        # redis-py reads it as Redis's module list.
        self.assertEqual(self.r.info()["modules"][0]["name"], "bf")
        self.assertEqual(self.r.info()["modules"][0]["ver"], 20423)

    def test_errorstats_count_by_prefix_and_reset(self):
        c = RespConnection(self.server.port)
        self.addCleanup(c.close)
        c.call("BF.RESERVE", "k", "0.01", "100", "NONSCALING", "EXPANSION", "2")
        c.call("BF.RESERVE", "k", "0.01", "100")
        c.call("BF.INFO", "k", "BOGUS")
        c.call("BF.INFO", "k", "BOGUS")
        c.call("NOSUCHCOMMAND")
        c.call("BF.ADD", "k")
        self.assertEqual(self.info_text("errorstats"),
                         "# Errorstats\r\nerrorstat_ERR:count=2\r\nerrorstat_Invalid:count=2\r\n"
                         "errorstat_Nonscaling:count=1\r\n")
        self.assertEqual(self.r.info("stats")["total_error_replies"], 5)
        self.r.config_resetstat()
        self.assertEqual(self.info_text("errorstats"), "# Errorstats\r\n")
        self.assertEqual(self.r.info("stats")["total_error_replies"], 0)

    def test_redis_7_fields_that_apply(self):
        info = self.r.info("everything")
        for field in ("redis_git_sha1", "redis_build_id", "monotonic_clock", "atomicvar_api",
                      "process_supervised", "configured_hz", "lru_clock", "executable",
                      "cluster_connections", "client_recent_max_input_buffer",
                      "client_recent_max_output_buffer", "tracking_clients",
                      "clients_in_timeout_table", "used_memory_peak_perc", "used_memory_startup",
                      "used_memory_dataset_perc", "used_memory_lua", "number_of_cached_scripts",
                      "allocator_rss_ratio", "rss_overhead_ratio", "mem_not_counted_for_evict",
                      "mem_replication_backlog", "mem_clients_slaves", "mem_clients_normal",
                      "mem_aof_buffer", "lazyfree_pending_objects", "async_loading",
                      "current_fork_perc", "rdb_last_load_keys_expired",
                      "aof_rewrites_consecutive_failures", "module_fork_in_progress",
                      "total_net_repl_input_bytes", "total_net_repl_output_bytes", "sync_full",
                      "expired_stale_perc", "expired_time_cap_reached_count",
                      "expire_cycle_cpu_milliseconds", "evicted_keys", "pubsub_channels",
                      "latest_fork_usec", "total_reads_processed", "total_writes_processed",
                      "io_threaded_reads_processed", "client_output_buffer_limit_disconnections",
                      "client_query_buffer_limit_disconnections", "used_cpu_sys_children",
                      "used_cpu_user_main_thread"):
            self.assertIn(field, info)
        self.assertTrue(info["executable"].endswith("bloomery"))
        self.assertGreater(info["total_reads_processed"], 0)
        self.assertEqual(info["maxmemory_policy"], "noeviction")

    def test_info_hello_and_readme_name_one_redis_version(self):
        # Clients read the version from either; README says which it is.
        c = RespConnection(self.server.port)
        self.addCleanup(c.close)
        hello = c.call("HELLO", "2")
        version = dict(zip(hello[::2], hello[1::2]))[b"version"].decode()
        self.assertEqual(str(self.r.info("server")["redis_version"]), version)
        with open(os.path.join(harness.ROOT, "README.md")) as readme:
            self.assertIn("`redis_version:%s`" % version, readme.read())

    def test_hello_and_module_list_show_redisbloom(self):
        c = RespConnection(self.server.port)
        self.addCleanup(c.close)
        entry = b"$4\r\nname\r\n$2\r\nbf\r\n$3\r\nver\r\n:20423\r\n$4\r\npath\r\n$8\r\nbuilt-in\r\n$4\r\nargs\r\n"
        for protocol, header, empty in ((b"3", b"%4\r\n", b"*0\r\n"), (b"2", b"*8\r\n", b"*0\r\n")):
            raw = harness.raw_connection(self.server.port)
            self.addCleanup(raw.close)
            raw.sendall(b"HELLO " + protocol + b"\r\n")
            data = b""
            while not data.endswith(b"$7\r\nmodules\r\n*1\r\n" + header + entry + empty):
                chunk = raw.recv(4096)
                self.assertTrue(chunk, data)
                data += chunk
        self.assertEqual(c.call("MODULE", "LIST"),
                         [[b"name", b"bf", b"ver", 20423, b"path", b"built-in", b"args", []]])


class BfDebugTest(harness.SharedServerTestCase):

    def test_layers_add_up_to_bf_info(self):
        r = self.server.client()
        self.addCleanup(r.close)
        r.flushall()
        r.execute_command("BF.RESERVE", "k", "0.01", "100", "LAYOUT", "CLASSIC")
        r.execute_command("BF.MADD", "k", *["i%d" % i for i in range(700)])
        lines = [line.decode() for line in r.execute_command("BF.DEBUG", "k")]
        info = dict(zip(*[iter(r.execute_command("BF.INFO", "k"))] * 2))
        self.assertEqual(lines[0], "size:%d" % info[b"Number of items inserted"])
        self.assertEqual(len(lines) - 1, info[b"Number of filters"])
        layers = [dict(field.split(":") for field in line.split()) for line in lines[1:]]
        self.assertEqual(sum(int(l["capacity"]) for l in layers), info[b"Capacity"])
        self.assertEqual(sum(int(l["size"]) for l in layers), info[b"Number of items inserted"])
        for i, layer in enumerate(layers):
            self.assertEqual(int(layer["bytes"]) * 8, int(layer["bits"]))
            self.assertEqual(layer["hashwidth"], "64")
            self.assertEqual(int(layer["capacity"]), 100 * 2 ** i)
            self.assertAlmostEqual(float(layer["ratio"]), 0.01 / 2 ** (i + 1))
        # The first layer as RedisBloom sizes it: 100 items at 0.5 %.
        self.assertEqual(layers[0]["hashes"], "8")


class OutputBufferLimitTest(unittest.TestCase):

    def start(self, *args):
        server = harness.Server(*args, threads=2)
        server.start()
        self.addCleanup(server.cleanup)
        r = server.client()
        self.addCleanup(r.close)
        return server, r

    def limits(self, r):
        return r.config_get("client-output-buffer-limit")["client-output-buffer-limit"]

    def test_config_get_set_in_redis_form(self):
        server, r = self.start("--client-output-buffer-limit", "replica 512mb 128mb 120")
        self.assertEqual(self.limits(r), "normal 1073741824 0 0 slave 536870912 134217728 120 "
                                         "pubsub 33554432 8388608 60")
        self.assertTrue(r.config_set("client-output-buffer-limit", "normal 0 0 0 pubsub 1mb 1kb 5"))
        self.assertEqual(self.limits(r), "normal 0 0 0 slave 536870912 134217728 120 "
                                         "pubsub 1048576 1024 5")
        self.assertTrue(r.config_set("client-output-buffer-limit", "4mb"))
        self.assertTrue(self.limits(r).startswith("normal 4194304 0 0 slave"))
        c = RespConnection(server.port)
        self.addCleanup(c.close)
        prefix = b"ERR CONFIG SET failed (possibly related to argument 'client-output-buffer-limit') - "
        self.assertEqual(c.call("CONFIG", "SET", "client-output-buffer-limit", "normal 1 2"),
                         Err(prefix + b"Wrong number of arguments in buffer limit configuration."))
        self.assertEqual(c.call("CONFIG", "SET", "client-output-buffer-limit", "master 1 2 3"),
                         Err(prefix + b"Invalid client class specified in buffer limit configuration."))
        self.assertEqual(c.call("CONFIG", "SET", "client-output-buffer-limit", "normal 1 2 x"),
                         Err(prefix + b"Error in hard, soft or soft_seconds setting in buffer "
                                      b"limit configuration."))
        self.assertTrue(self.limits(r).startswith("normal 4194304 0 0 slave"))

    def test_the_config_file_takes_redis_form_and_the_single_size(self):
        import tempfile
        with tempfile.NamedTemporaryFile("w", suffix=".conf", delete=False) as f:
            f.write('client-output-buffer-limit = "normal 64mb 32mb 10 pubsub 1mb 512kb 5"\n'
                    'latency-monitor-threshold = 25\n')
        self.addCleanup(os.unlink, f.name)
        _, r = self.start("--config", f.name)
        self.assertEqual(self.limits(r), "normal 67108864 33554432 10 slave 268435456 67108864 60 "
                                         "pubsub 1048576 524288 5")
        self.assertEqual(r.config_get("latency-monitor-threshold"),
                         {"latency-monitor-threshold": "25"})
        _, r = self.start("--client-output-buffer-limit", "2mb")
        self.assertTrue(self.limits(r).startswith("normal 2097152 0 0 slave 268435456"))

    def test_the_flag_refuses_a_bad_form(self):
        server = harness.Server("--client-output-buffer-limit", "normal 1 2")
        self.addCleanup(server.cleanup)
        server.start(expect_failure=True)
        self.assertNotEqual(server.wait(), 0)
        self.assertIn("--client-output-buffer-limit: Wrong number of arguments", server.log())

    def flood(self, port, reply_bytes, commands):
        """A client that asks for large replies and never reads them."""
        s = harness.raw_connection(port)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        payload = b"x" * reply_bytes
        command = b"*2\r\n$4\r\nECHO\r\n$%d\r\n%s\r\n" % (len(payload), payload)
        for _ in range(commands):
            try:
                s.sendall(command)
            except OSError:
                break
        return s

    def assert_closed(self, s, r, what):
        harness.wait_until(
            lambda: r.info("stats")["client_output_buffer_limit_disconnections"] >= 1,
            timeout=60, what=what)
        s.settimeout(10)

        def closed():
            # Its replies so far are read and dropped; a reset or 10 s
            # without a byte count as closed too.
            try:
                return not s.recv(1 << 20)
            except (ConnectionError, socket.timeout, OSError):
                return True
        harness.wait_until(closed, 60, what + ": the connection to close", interval=0)

    def test_soft_limit_closes_a_client_above_it_for_longer_than_its_seconds(self):
        server, r = self.start("--client-output-buffer-limit", "normal 0 256kb 1")
        s = self.flood(server.port, 1 << 20, 16)
        self.addCleanup(s.close)
        # Above the soft limit since its first reply: closed once a second
        # has passed, though no new reply was added meanwhile.
        self.assert_closed(s, r, "the soft limit to close the client")
        self.assertIn("closed for overcoming of output buffer limits", server.log())
        self.assertEqual(r.ping(), True)

    def test_soft_limit_spares_a_client_that_reads(self):
        server, r = self.start("--client-output-buffer-limit", "normal 0 64kb 1")
        c = RespConnection(server.port)
        self.addCleanup(c.close)
        for _ in range(30):
            self.assertEqual(c.call("ECHO", b"y" * 200000), b"y" * 200000)
        self.assertEqual(r.info("stats")["client_output_buffer_limit_disconnections"], 0)

    def test_hard_limit_closes_a_replica_feed_that_falls_behind(self):
        server, r = self.start("--client-output-buffer-limit", "replica 128kb 0 0",
                               "--repl-backlog-size", "1")
        replica = harness.raw_connection(server.port)
        self.addCleanup(replica.close)
        replica.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        replica.sendall(b"REPLCONF listening-port 0\r\nPSYNC ? -1\r\n")
        harness.wait_until(lambda: r.info("replication")["connected_slaves"] == 1,
                           what="the replica's feed")
        # Writes pile up in the stream the replica does not read: more than
        # the kernel's socket buffers hold (a few MB), the rest waits in the
        # journal for the feed.
        for i in range(600):
            r.execute_command("BF.MADD", "k%d" % (i % 20),
                              *["item-%d-%d" % (i, j) for j in range(1000)])
            if r.info("stats")["client_output_buffer_limit_disconnections"]:
                break
        harness.wait_until(
            lambda: r.info("stats")["client_output_buffer_limit_disconnections"] == 1,
            timeout=60, what="the feed to be closed")
        harness.wait_until(lambda: r.info("replication")["connected_slaves"] == 0,
                           what="the replica to be gone")
        self.assertIn("closed for overcoming of output buffer limits", server.log())


if __name__ == "__main__":
    unittest.main()
