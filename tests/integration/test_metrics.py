"""Monitoring: /metrics, /healthz and /readyz on --metrics-port,
INFO commandstats and latencystats, SLOWLOG, --health-check and --test-config.

/metrics is parsed with Debian's python3-prometheus-client parser. Hostile
HTTP clients (a huge header, a slowloris, many idle connections) must neither
grow the server's memory nor keep it from serving.
"""

import http.client
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import unittest

from prometheus_client.parser import text_string_to_metric_families

import harness


class MetricsServer(harness.Server):
    """A bloomery with --metrics-port on a free port."""

    def __init__(self, *extra, **kwargs):
        super().__init__(*extra, **kwargs)
        self.metrics_port = None

    def args(self):
        self.metrics_port = harness.free_port()
        return super().args() + ["--metrics-port", str(self.metrics_port)]

    def http(self, path, method="GET", timeout=10.0):
        """(status, body text) of one request."""
        connection = http.client.HTTPConnection("127.0.0.1", self.metrics_port, timeout=timeout)
        try:
            connection.request(method, path)
            response = connection.getresponse()
            return response.status, response.read().decode()
        finally:
            connection.close()

    def metrics(self):
        """{family name: Metric} of a scrape, through the Prometheus parser."""
        status, text = self.http("/metrics")
        assert status == 200, status
        return {family.name: family for family in text_string_to_metric_families(text)}

    def rss_kb(self):
        with open("/proc/%d/status" % self.process.pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return 0


def sample(families, family, name, **labels):
    """The value of the sample `name` with exactly `labels` in `family`, or None."""
    for s in families[family].samples:
        if s.name == name and s.labels == labels:
            return s.value
    return None


def overfilled_filter(client, key):
    """A filter sized for 1000 items at 1 % holding 2000 items' bits: the
    bit arrays of two such filters ORed together, loaded with BF.LOADCHUNK
    (the redisbloom scheme's dump is its bit array)."""
    chunks = []
    for part in (0, 1):
        name = "%s:part%d" % (key, part)
        client.execute_command("BF.RESERVE", name, "0.01", "1000", "NONSCALING", "SCHEME",
                               "REDISBLOOM")
        client.execute_command("BF.MADD", name,
                               *[b"item:%d" % i for i in range(part * 1000, part * 1000 + 1000)])
        chunks.append(harness.scandump(client, name))
        client.delete(name)
    merged = [chunks[0][0]] + [(it, bytes(x | y for x, y in zip(a, b)))
                               for (it, a), (_, b) in zip(chunks[0][1:], chunks[1][1:])]
    for it, data in merged:
        client.execute_command("BF.LOADCHUNK", key, it, data)


def run_bloomery(*args, env=None, timeout=30):
    environment = dict(os.environ)
    for key in list(environment):
        if key.startswith("BLOOMERY_") and key != "BLOOMERY_BIN":
            del environment[key]
    environment.update(env or {})
    result = subprocess.run([harness.BINARY] + list(args), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, env=environment,
                            timeout=timeout)
    return result.returncode, (result.stdout + result.stderr).decode("utf-8", "replace")


class FalsePositiveGauges(unittest.TestCase):
    """bloomery_filters_over_error_rate and bloomery_filter_fpr_worst_ratio:
    each scrape checks a bounded slice of the keyspace."""

    def setUp(self):
        self.server = MetricsServer()
        self.server.start()
        self.addCleanup(self.server.cleanup)
        self.r = self.server.client()

    def gauges(self):
        m = self.server.metrics()
        return dict(over=sample(m, "bloomery_filters_over_error_rate",
                                "bloomery_filters_over_error_rate"),
                    worst=sample(m, "bloomery_filter_fpr_worst_ratio",
                                 "bloomery_filter_fpr_worst_ratio"),
                    checked=sample(m, "bloomery_fpr_sweep_filters", "bloomery_fpr_sweep_filters"),
                    sweeps=sample(m, "bloomery_fpr_sweeps", "bloomery_fpr_sweeps_total"))

    def test_an_overfilled_filter_is_counted_and_sweeps_are_bounded(self):
        self.assertEqual(self.gauges(), dict(over=0, worst=0, checked=0, sweeps=1))
        self.r.execute_command("BF.ADD", "fine", "a")
        overfilled_filter(self.r, "over")
        fpr = float(self.r.execute_command("BF.INFO", "over", "FPR")[0])
        g = self.gauges()
        self.assertEqual((g["over"], g["checked"], g["sweeps"]), (1, 2, 2))
        self.assertAlmostEqual(g["worst"], fpr / 0.01, places=9)
        self.assertGreater(g["worst"], 5)
        # Thousands of keys: one scrape no longer walks them all, and the
        # gauges keep the last complete sweep until the next one ends.
        pipe = self.r.pipeline(transaction=False)
        for i in range(5000):
            pipe.execute_command("BF.ADD", "many:%d" % i, "x")
        pipe.execute()
        g = self.gauges()
        self.assertEqual((g["over"], g["checked"], g["sweeps"]), (1, 2, 2))
        for _ in range(100):
            g = self.gauges()
            if g["sweeps"] > 2:
                break
        self.assertEqual((g["over"], g["sweeps"]), (1, 3))
        self.assertGreaterEqual(g["checked"], 5002)
        self.r.delete("over")
        for _ in range(100):
            g = self.gauges()
            if g["sweeps"] > 3:
                break
        self.assertEqual((g["over"], g["sweeps"]), (0, 4))
        self.assertLess(g["worst"], 1)


class Metrics(unittest.TestCase):
    """One server, scraped and driven with redis-py."""

    @classmethod
    def setUpClass(cls):
        cls.server = MetricsServer("--slowlog-log-slower-than", "0", "--metrics-request-timeout", "1")
        cls.server.start()
        cls.r = cls.server.client()

    @classmethod
    def tearDownClass(cls):
        cls.server.cleanup()

    def test_metrics_parse_and_move_after_commands(self):
        before = self.server.metrics()
        for family in ("bloomery_command_calls", "bloomery_command_duration_seconds",
                       "bloomery_connected_clients", "bloomery_rejected_connections",
                       "bloomery_filters", "bloomery_filter_bytes", "bloomery_filter_items",
                       "bloomery_used_memory_bytes", "bloomery_snapshot_last_success",
                       "bloomery_snapshot_age_seconds", "bloomery_journal_enabled",
                       "bloomery_net_input_bytes", "bloomery_net_output_bytes",
                       "bloomery_ready"):
            self.assertIn(family, before)
        self.assertEqual(before["bloomery_command_calls"].type, "counter")
        self.assertEqual(before["bloomery_command_duration_seconds"].type, "histogram")
        calls = sample(before, "bloomery_command_calls", "bloomery_command_calls_total",
                       command="bf.add") or 0
        count = sample(before, "bloomery_command_duration_seconds",
                       "bloomery_command_duration_seconds_count", command="bf.add") or 0
        self.r.delete("metrics:k")
        for i in range(50):
            self.r.execute_command("BF.ADD", "metrics:k", "item%d" % i)
        after = self.server.metrics()
        self.assertEqual(sample(after, "bloomery_command_calls", "bloomery_command_calls_total",
                                command="bf.add"), calls + 50)
        histogram_count = sample(after, "bloomery_command_duration_seconds",
                                 "bloomery_command_duration_seconds_count", command="bf.add")
        self.assertEqual(histogram_count, count + 50)
        self.assertEqual(sample(after, "bloomery_command_duration_seconds",
                                "bloomery_command_duration_seconds_bucket", command="bf.add",
                                le="+Inf"), histogram_count)
        buckets = [s for s in after["bloomery_command_duration_seconds"].samples
                   if s.name.endswith("_bucket") and s.labels["command"] == "bf.add"]
        values = [s.value for s in sorted(buckets, key=lambda s: float(s.labels["le"]))]
        self.assertEqual(values, sorted(values))
        self.assertGreater(sample(after, "bloomery_command_duration_seconds",
                                  "bloomery_command_duration_seconds_sum", command="bf.add"), 0)
        self.assertGreaterEqual(sample(after, "bloomery_filters", "bloomery_filters"), 1)
        self.assertGreaterEqual(sample(after, "bloomery_filter_items", "bloomery_filter_items"), 50)
        self.assertGreater(sample(after, "bloomery_filter_bytes", "bloomery_filter_bytes"), 0)
        self.assertGreaterEqual(sample(after, "bloomery_connected_clients",
                                       "bloomery_connected_clients"), 1)
        self.assertEqual(sample(after, "bloomery_ready", "bloomery_ready"), 1)
        self.assertGreater(sample(after, "bloomery_net_input_bytes", "bloomery_net_input_bytes_total"),
                           sample(before, "bloomery_net_input_bytes", "bloomery_net_input_bytes_total"))

    def test_health_and_readiness_endpoints(self):
        self.assertEqual(self.server.http("/healthz"), (200, "ok\n"))
        self.assertEqual(self.server.http("/readyz"), (200, "ready\n"))
        self.assertEqual(self.server.http("/metrics?x=1")[0], 200)
        self.assertEqual(self.server.http("/nope")[0], 404)
        self.assertEqual(self.server.http("/metrics", method="POST")[0], 405)
        self.assertEqual(self.server.http("/healthz", method="HEAD"), (200, ""))

    def test_commandstats_tell_rejected_from_failed(self):
        self.r.config_resetstat()
        self.r.delete("cs:k")
        self.r.execute_command("BF.RESERVE", "cs:k", "0.01", "100")
        with self.assertRaises(Exception):
            self.r.execute_command("BF.RESERVE", "cs:k", "0.01", "100")  # exists: failed
        with self.assertRaises(Exception):
            self.r.execute_command("BF.ADD", "cs:k")  # arity: rejected
        self.r.execute_command("BF.ADD", "cs:k", "a")
        stats = self.r.info("commandstats")
        self.assertEqual(stats["cmdstat_bf.reserve"]["calls"], 2)
        self.assertEqual(stats["cmdstat_bf.reserve"]["failed_calls"], 1)
        self.assertEqual(stats["cmdstat_bf.reserve"]["rejected_calls"], 0)
        self.assertEqual(stats["cmdstat_bf.add"]["calls"], 1)
        self.assertEqual(stats["cmdstat_bf.add"]["rejected_calls"], 1)
        self.assertEqual(stats["cmdstat_bf.add"]["failed_calls"], 0)
        self.assertIn("usec_per_call", stats["cmdstat_bf.add"])
        # CONFIG RESETSTAT starts them again.
        self.r.config_resetstat()
        self.assertNotIn("cmdstat_bf.add", self.r.info("commandstats"))
        # Not in the default INFO, as in Redis.
        self.assertNotIn("cmdstat_info", self.r.info())

    def test_latencystats_have_redis_percentiles(self):
        for i in range(20):
            self.r.execute_command("BF.EXISTS", "lat:k", str(i))
        info = self.r.info("latencystats")  # redis-py splits Redis's p50=...,p99=... fields
        fields = info["latency_percentiles_usec_bf.exists"]
        self.assertEqual(sorted(fields), ["p50", "p99", "p99.9"])
        self.assertLessEqual(float(fields["p50"]), float(fields["p99"]))
        self.assertLessEqual(float(fields["p99"]), float(fields["p99.9"]))

    def test_slowlog_logs_every_command_at_threshold_zero(self):
        self.r.slowlog_reset()
        self.r.execute_command("CLIENT", "SETNAME", "slow-one")
        long_item = "x" * 200
        self.r.execute_command("BF.MADD", "sl:k", long_item, *[str(i) for i in range(40)])
        entries = self.r.execute_command("SLOWLOG", "GET", "1")
        self.assertEqual(len(entries), 1)
        entry_id, when, duration, args, address, name = entries[0]
        self.assertGreater(when, time.time() - 60)
        self.assertGreaterEqual(duration, 0)
        self.assertEqual(len(args), 32)
        self.assertEqual(args[0], b"BF.MADD")
        self.assertEqual(args[2], b"x" * 128 + b"... (72 more bytes)")
        self.assertEqual(args[31], b"... (12 more arguments)")
        self.assertTrue(address.startswith(b"127.0.0.1:"))
        self.assertEqual(name, b"slow-one")
        self.assertGreaterEqual(self.r.slowlog_len(), 2)
        everything = self.r.execute_command("SLOWLOG", "GET", "-1")
        self.assertEqual(self.r.slowlog_len(), len(everything) + 1)  # + that GET
        self.assertEqual([e[0] for e in everything], sorted((e[0] for e in everything), reverse=True))
        # Off at run time, on again.
        self.r.config_set("slowlog-log-slower-than", "-1")
        try:
            self.r.slowlog_reset()
            self.r.ping()
            self.assertEqual(self.r.slowlog_len(), 0)
        finally:
            self.r.config_set("slowlog-log-slower-than", "0")
        self.assertEqual(self.r.config_get("slowlog-*"),
                         {"slowlog-log-slower-than": "0", "slowlog-max-len": "128"})

    def test_slowlog_hides_passwords(self):
        self.r.slowlog_reset()
        with self.assertRaises(Exception):
            self.r.execute_command("AUTH", "not-the-password")
        entries = self.r.execute_command("SLOWLOG", "GET", "-1")
        auth = [e for e in entries if e[3][0].upper() == b"AUTH"]
        self.assertEqual(auth[0][3], [b"AUTH", b"(redacted)"])

    def test_hostile_http_neither_grows_memory_nor_blocks(self):
        rss_before = self.server.rss_kb()
        # Huge headers: refused (431) or cut off, never buffered.
        for _ in range(30):
            with socket.create_connection(("127.0.0.1", self.server.metrics_port), timeout=10) as s:
                try:
                    s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * (1 << 20) + b"\r\n\r\n")
                except OSError:
                    pass  # closed while we were still sending
                try:
                    reply = s.recv(100)
                except OSError:
                    reply = b""
                self.assertTrue(reply == b"" or reply.startswith(b"HTTP/1.1 431"), reply)
        # Slowloris: one byte at a time is cut off at --metrics-request-timeout (1 s).
        # It keeps sending until it is closed; a server that never cut it off
        # would keep it for the whole minute.
        slow = socket.create_connection(("127.0.0.1", self.server.metrics_port), timeout=10)
        started = time.monotonic()
        closed = False
        request = b"GET /metrics HTTP/1.1\r\nX-Slow: " + b"z" * 100000
        for byte in request:
            try:
                slow.sendall(bytes([byte]))
            except OSError:
                closed = True
                break
            time.sleep(0.05)
            if time.monotonic() - started > 60:
                break
            slow.setblocking(False)
            try:
                closed = slow.recv(10) == b""
            except BlockingIOError:
                pass
            except OSError:
                closed = True
            slow.setblocking(True)
            if closed:
                break
        slow.close()
        self.assertTrue(closed, "a request trickled for a minute was never cut off")
        self.assertGreaterEqual(time.monotonic() - started, 0.9, "cut off before the timeout")
        # Many idle connections from one address: it keeps at most
        # --metrics-max-connections-per-client (8), the newest, and each new
        # one closes its oldest; the RESP side keeps serving meanwhile.
        idle = [socket.create_connection(("127.0.0.1", self.server.metrics_port), timeout=5)
                for _ in range(40)]
        try:
            self.assertTrue(self.r.ping())
            closed = 0
            for s in idle[:32]:
                try:
                    closed += s.recv(10) == b""
                except OSError:
                    closed += 1
            self.assertEqual(closed, 32)
            # A scrape gets through at once, in the place of an idle one.
            self.assertEqual(self.server.http("/healthz", timeout=2)[0], 200)
        finally:
            for s in idle:
                s.close()
        self.assertEqual(self.server.metrics()["bloomery_ready"].samples[0].value, 1)
        self.assertLess(self.server.rss_kb() - rss_before, 20 * 1024)


class Readiness(unittest.TestCase):

    def test_readyz_is_503_while_loading_and_shutting_down(self):
        tmp = tempfile.TemporaryDirectory(prefix="bloomery-ready-")
        self.addCleanup(tmp.cleanup)
        server = MetricsServer(data_dir=tmp.name, save="3600 1")
        self.addCleanup(server.cleanup)
        server.start()
        r = server.client()
        # A 240 MB filter with items in nearly every region of it (a
        # snapshot writes only the regions items touched): the final save
        # and the next load take a while.
        r.execute_command("BF.RESERVE", "big", "0.0001", "100000000", "NONSCALING")
        harness.add_range(r, "big", 0, 300000, batch=10000)
        seen = []  # (readyz, healthz) while it stops
        server.process.send_signal(signal.SIGTERM)
        while server.process.poll() is None:
            try:
                seen.append((server.http("/readyz", timeout=1)[0],
                             server.http("/healthz", timeout=1)[0]))
            except OSError:
                pass
            time.sleep(0.01)
        self.assertEqual(server.process.returncode, 0, server.log())
        self.assertIn((503, 200), seen)
        # Once not ready, never ready again.
        first = seen.index((503, 200))
        self.assertNotIn(200, [ready for ready, _ in seen[first:]])

        # Restart on that snapshot: 503 until loaded, then 200.
        again = MetricsServer(data_dir=tmp.name, save='""')
        self.addCleanup(again.cleanup)
        codes = []
        stop = threading.Event()

        def poll():
            while not stop.is_set():
                try:
                    if again.metrics_port is not None:
                        codes.append(again.http("/readyz", timeout=1)[0])
                except OSError:
                    pass
                time.sleep(0.005)

        poller = threading.Thread(target=poll)
        poller.start()
        try:
            again.start(timeout=60)
            # Ready once it answers PING: the poller sees 200 next.
            harness.wait_until(lambda: codes and codes[-1] == 200, 60, "/readyz to answer 200",
                               interval=0.01)
        finally:
            stop.set()
            poller.join()
        self.assertEqual(codes[-1], 200)
        if 503 in codes:  # the load may beat the first poll on a fast machine
            self.assertLess(codes.index(503), codes.index(200))


class HealthCheck(unittest.TestCase):

    def test_up_down_and_passwords(self):
        with harness.Server() as plain:
            code, text = run_bloomery("--health-check", "127.0.0.1:%d" % plain.port)
            self.assertEqual((code, text),
                             (0, "bloomery: 127.0.0.1:%d: PONG, role master\n" % plain.port))
            port = plain.port
        code, text = run_bloomery("--health-check", "127.0.0.1:%d" % port)
        self.assertEqual(code, 1, text)
        self.assertIn("cannot connect", text)
        code, text = run_bloomery("--health-check", "nonsense")
        self.assertEqual(code, 1)
        self.assertIn("HOST:PORT", text)

        with harness.Server("--requirepass", "s3cret") as locked:
            target = "127.0.0.1:%d" % locked.port
            self.assertEqual(run_bloomery("--health-check", target,
                                          env={"BLOOMERY_REQUIREPASS": "s3cret"})[0], 0)
            with tempfile.NamedTemporaryFile("w", suffix=".pw") as f:
                f.write("s3cret\n")
                f.flush()
                self.assertEqual(run_bloomery("--health-check", target,
                                              "--requirepass-file", f.name)[0], 0)
            code, text = run_bloomery("--health-check", target, env={"BLOOMERY_REQUIREPASS": "wrong"})
            self.assertEqual(code, 1)
            self.assertIn("refused the password: -WRONGPASS", text)
            code, text = run_bloomery("--health-check", target)
            self.assertEqual(code, 1)
            self.assertIn("-NOAUTH", text)

    def test_a_server_that_never_answers_times_out(self):
        with socket.socket() as listener:
            listener.bind(("127.0.0.1", 0))
            listener.listen(1)
            code, text = run_bloomery("--health-check", "127.0.0.1:%d" % listener.getsockname()[1],
                                      "--health-check-timeout", "0.5")
            self.assertEqual(code, 1)
            self.assertIn("timed out", text)  # run_bloomery fails on a hang

    def test_over_tls(self):
        if shutil.which("openssl") is None:
            self.skipTest("needs the openssl command")
        import test_tls
        with tempfile.TemporaryDirectory(prefix="bloomery-hc-tls-") as directory:
            certs = test_tls.make_certificates(directory)
            port = harness.free_port()
            server = harness.Server("--tls-port", str(port), "--tls-cert-file", certs["server.crt"],
                                    "--tls-key-file", certs["server.key"],
                                    "--tls-ca-cert-file", certs["ca.crt"])
            with server:
                client = ["--tls-cert-file", certs["client.crt"], "--tls-key-file",
                          certs["client.key"], "--tls-ca-cert-file", certs["ca.crt"]]
                code, text = run_bloomery("--health-check", "127.0.0.1:%d" % port,
                                          "--health-check-tls", *client)
                self.assertEqual(code, 0, text)
                # Without a client certificate the server refuses the handshake.
                code, text = run_bloomery("--health-check", "127.0.0.1:%d" % port,
                                          "--health-check-tls", "--tls-ca-cert-file", certs["ca.crt"])
                self.assertEqual(code, 1, text)


class TestConfig(unittest.TestCase):

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="bloomery-testconfig-")
        self.addCleanup(self.tmp.cleanup)

    def test_a_good_configuration_is_ok_and_nothing_is_created_or_bound(self):
        data = os.path.join(self.tmp.name, "data")
        with socket.socket() as taken:  # a port in use: --test-config binds nothing
            taken.bind(("127.0.0.1", 0))
            taken.listen(1)
            port = taken.getsockname()[1]
            code, text = run_bloomery("--test-config", "--port", str(port), "--dir", data,
                                      "--metrics-port", "9188")
        self.assertEqual(code, 0, text)
        self.assertTrue(text.startswith("configuration OK\n"), text)
        self.assertIn("listen: 127.0.0.1 port %d" % port, text)
        self.assertIn("metrics: http://127.0.0.1:9188/metrics", text)
        self.assertFalse(os.path.exists(data))

    def test_a_config_file_and_environment_are_checked_too(self):
        path = os.path.join(self.tmp.name, "bloomery.conf")
        with open(path, "w") as f:
            f.write("port = 7000\nsave = \"1\"\n")
        code, text = run_bloomery("--test-config", "--config", path, "--dir", self.tmp.name,
                                  env={"BLOOMERY_DBFILENAME": "a/b"})
        self.assertEqual(code, 1, text)
        self.assertIn("--save:", text)
        self.assertIn("--dbfilename: must be a plain file name", text)

    def test_a_bad_flag_value(self):
        code, text = run_bloomery("--test-config", "--port", "not-a-port")
        self.assertEqual(code, 1)
        self.assertIn("configuration invalid", text)
        self.assertIn("--port", text)

    def test_a_missing_acl_file_and_an_unwritable_dir_are_both_reported(self):
        missing = os.path.join(self.tmp.name, "users.acl")
        code, text = run_bloomery("--test-config", "--aclfile", missing, "--dir", "/proc/self")
        self.assertEqual(code, 1, text)
        self.assertIn("cannot read --aclfile " + missing, text)
        self.assertIn("--dir '/proc/self': not writable", text)

    def test_the_real_start_refuses_what_test_config_refuses(self):
        server = harness.Server("--aclfile", os.path.join(self.tmp.name, "none.acl"))
        self.addCleanup(server.cleanup)
        server.start(expect_failure=True)
        self.assertNotEqual(server.wait(10), 0)
        self.assertIn("refusing to start: cannot read --aclfile", server.log())


if __name__ == "__main__":
    unittest.main()
