"""Access control of the real binary: passwords (--requirepass, its file and
environment variable), AUTH and HELLO AUTH, the limits on clients that have not
authenticated yet, protected mode, and ACL file users, driven by raw sockets,
redis-cli, redis-py and redis-benchmark.

Protected mode is tested without leaving loopback: the server listens on
127.0.0.1 and a test client binds its socket to 127.0.0.2 first (Linux routes
all of 127.0.0.0/8 to lo), which the server must treat as a remote client.
"""

import os
import socket
import subprocess
import tempfile
import unittest

import redis

import harness
from test_protocol import Err, Map, RespConnection, encode

PASSWORD = "s3cret-Pa55"
NOAUTH = Err(b"NOAUTH Authentication required.")
WRONGPASS = Err(b"WRONGPASS invalid username-password pair or user is disabled.")
DENIED_PREFIX = b"-DENIED bloomery is running in protected mode"
KB = 1024
MB = 1024 * 1024

USERS = (
    "# a read-only credential for the pre-check, a writer, an administrator\n"
    "user reader on >reader-pw ~* +@read\n"
    "user writer on >writer-pw ~* +@read +@write -@dangerous\n"
    "user admin on >admin-pw ~* +@all\n"
    "user default off\n"
)


def run_tool(args, env=None, timeout=60):
    environment = dict(os.environ)
    if env:
        environment.update(env)
    return subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=environment,
                          timeout=timeout, check=False)


class RespFrom(RespConnection):
    """A RespConnection whose socket is bound to a chosen source address."""

    def __init__(self, port, source, timeout=10.0):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.settimeout(timeout)
        sock.bind((source, 0))
        sock.connect(("127.0.0.1", port))
        self.sock = sock
        self.timeout = timeout
        self.buf = bytearray()
        self.pos = 0


def command_of_size(total, name="AUTH"):
    """A two-argument command `name <filler>` of exactly `total` bytes."""
    filler = total - len(encode(name, ""))
    while len(encode(name, "x" * filler)) > total:
        filler -= 1
    data = encode(name, "x" * filler)
    assert len(data) == total, (len(data), total)
    return data


class PasswordTest(harness.SharedServerTestCase):
    """One server with --requirepass; each test uses fresh connections."""

    @classmethod
    def setUpClass(cls):
        cls.server = harness.Server("--requirepass", PASSWORD, threads=2)
        cls.server.start()

    def raw(self):
        c = RespConnection(self.server.port)
        self.addCleanup(c.close)
        return c

    def authed(self):
        c = self.raw()
        self.assertEqual(c.call("AUTH", PASSWORD), b"OK")
        return c

    def test_every_command_answers_noauth_before_auth(self):
        c = self.raw()
        for command in (("BF.ADD", "noauth:k", "a"), ("BF.EXISTS", "noauth:k", "a"),
                        ("BF.RESERVE", "noauth:r", "0.01", "10"),
                        ("FLUSHALL",), ("DBSIZE",), ("PING",), ("CONFIG", "GET", "*"), ("KEYS", "*"),
                        ("SHUTDOWN", "NOSAVE"), ("ACL", "WHOAMI"), ("CLIENT", "LIST")):
            self.assertEqual(c.call(*command), NOAUTH, command)
        self.assertEqual(self.authed().call("EXISTS", "noauth:k", "noauth:r"), 0)  # nothing created
        self.assertEqual(self.server.process.poll(), None)  # SHUTDOWN did not run

    def test_auth_then_commands_work(self):
        c = self.raw()
        self.assertEqual(c.call("AUTH", PASSWORD), b"OK")
        self.assertEqual(c.call("BF.ADD", "auth:k", "a"), 1)
        self.assertEqual(c.call("BF.EXISTS", "auth:k", "a"), 1)
        c2 = self.raw()
        self.assertEqual(c2.call("AUTH", "default", PASSWORD), b"OK")
        self.assertEqual(c2.call("BF.EXISTS", "auth:k", "a"), 1)
        self.assertEqual(c2.call("ACL", "WHOAMI"), b"default")

    def test_wrong_password_answers_wrongpass_and_the_connection_stays(self):
        c = self.raw()
        for attempt in (("AUTH", "nope"), ("AUTH", PASSWORD + "x"), ("AUTH", PASSWORD[:-1]),
                        ("AUTH", "default", "nope"), ("AUTH", "nobody", PASSWORD), ("AUTH", "")):
            self.assertEqual(c.call(*attempt), WRONGPASS, attempt)
        self.assertEqual(c.call("PING"), NOAUTH)
        self.assertEqual(c.call("AUTH", PASSWORD), b"OK")
        self.assertEqual(c.call("PING"), b"PONG")

    def test_hello_3_auth_authenticates_and_switches_to_resp3(self):
        c = self.raw()
        reply = c.call("HELLO", "3")
        self.assertIsInstance(reply, Err)
        self.assertTrue(reply.startswith(b"NOAUTH HELLO must be called with the client already authenticated"))
        self.assertEqual(c.call("HELLO", "3", "AUTH", "default", "nope"), WRONGPASS)
        reply = c.call("HELLO", "3", "AUTH", "default", PASSWORD, "SETNAME", "hello3")
        self.assertIsInstance(reply, Map)
        self.assertEqual(dict(reply)[b"proto"], 3)
        self.assertEqual(c.call("BF.ADD", "hello:k", "a"), 1)
        self.assertEqual(c.call("CLIENT", "GETNAME"), b"hello3")

    def test_hello_2_auth(self):
        c = self.raw()
        reply = c.call("HELLO", "2", "AUTH", "default", PASSWORD)
        self.assertIsInstance(reply, list)
        self.assertEqual(reply[reply.index(b"proto") + 1], 2)
        self.assertEqual(c.call("PING"), b"PONG")

    def test_quit_needs_no_auth(self):
        c = self.raw()
        self.assertEqual(c.call("QUIT"), b"OK")
        _, closed = c.read_all_until_closed()
        self.assertTrue(closed)

    def test_config_get_requirepass_is_redacted_and_client_list_names_the_user(self):
        c = self.authed()
        self.assertEqual(c.call("CONFIG", "GET", "requirepass"), [b"requirepass", b"<redacted>"])
        self.assertIn(b" user=default ", c.call("CLIENT", "LIST"))
        self.assertNotIn(PASSWORD, self.server.log())

    def test_redis_cli_with_a_and_rediscli_auth(self):
        base = ["redis-cli", "-p", str(self.server.port)]
        out = run_tool(base + ["BF.ADD", "cli:k", "a"])
        self.assertIn(b"NOAUTH Authentication required.", out.stdout + out.stderr)
        out = run_tool(base + ["-a", PASSWORD, "--no-auth-warning", "BF.ADD", "cli:k", "a"])
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(out.stdout, b"1\n")
        out = run_tool(base + ["BF.EXISTS", "cli:k", "a"], env={"REDISCLI_AUTH": PASSWORD})
        self.assertEqual(out.stdout, b"1\n")
        out = run_tool(base + ["-a", "wrong", "--no-auth-warning", "PING"])
        self.assertIn(b"WRONGPASS", out.stdout + out.stderr)

    def test_redis_py_password(self):
        r = self.server.client(password=PASSWORD)
        self.addCleanup(r.close)
        self.assertTrue(r.bf().add("py:k", "a"))
        self.assertEqual(r.bf().exists("py:k", "a"), 1)
        named = self.server.client(username="default", password=PASSWORD)
        self.addCleanup(named.close)
        self.assertEqual(named.bf().exists("py:k", "a"), 1)
        anonymous = self.server.client()
        self.addCleanup(anonymous.close)
        with self.assertRaises(redis.exceptions.AuthenticationError):
            anonymous.ping()
        wrong = self.server.client(password="wrong")
        self.addCleanup(wrong.close)
        # redis-py 4.3 raises WRONGPASS during its handshake as a ResponseError.
        with self.assertRaises((redis.exceptions.ResponseError,
                                redis.exceptions.AuthenticationError)) as caught:
            wrong.ping()
        self.assertIn("WRONGPASS", str(caught.exception))

    def test_redis_benchmark_with_a(self):
        port = str(self.server.port)
        out = run_tool(["redis-benchmark", "-p", port, "-a", PASSWORD, "-t", "ping", "-n", "2000",
                        "-c", "4", "-q"], timeout=120)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn(b"requests per second", out.stdout)
        self.assertNotIn(b"NOAUTH", out.stdout + out.stderr)
        out = run_tool(["redis-benchmark", "-p", port, "-a", PASSWORD, "-n", "2000", "-c", "4", "-q",
                        "-r", "100000", "BF.ADD", "bench:k", "__rand_int__"], timeout=120)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn(b"requests per second", out.stdout)
        self.assertGreater(self.authed().call("BF.CARD", "bench:k"), 0)

    # ---- limits before authentication ------------------------------------

    def test_ten_arguments_pass_eleven_close_the_connection(self):
        c = self.raw()
        self.assertEqual(c.call("BF.MADD", "k", *["i%d" % i for i in range(8)]), NOAUTH)  # 10 args
        c.send(b"*11\r\n")
        data, closed = c.read_all_until_closed()
        self.assertEqual(data, b"-ERR Protocol error: unauthenticated multibulk length\r\n")
        self.assertTrue(closed)

    def test_sixteen_kilobyte_bulk_passes_one_more_byte_closes(self):
        c = self.raw()
        self.assertEqual(c.call("AUTH", "x" * (16 * KB)), WRONGPASS)
        self.assertEqual(c.call("PING"), NOAUTH)
        c.send(b"*2\r\n$4\r\nAUTH\r\n$16385\r\n")
        data, closed = c.read_all_until_closed()
        self.assertEqual(data, b"-ERR Protocol error: unauthenticated bulk length\r\n")
        self.assertTrue(closed)

    def test_after_auth_the_normal_limits_apply(self):
        c = self.raw()
        # AUTH and the larger command in one write: the limits switch between them.
        c.send(encode("AUTH", PASSWORD) + encode("BF.MADD", "big:k", *["i%d" % i for i in range(9)]))
        self.assertEqual(c.read(), b"OK")
        self.assertEqual(c.read(), [1] * 9)
        self.assertEqual(c.call("BF.ADD", "big:k", "y" * (16 * KB + 1)), 1)
        self.assertEqual(c.call("BF.ADD", "big:k", "z" * (2 * MB)), 1)
        self.assertEqual(c.call("PING"), b"PONG")


class UnauthenticatedBufferTest(unittest.TestCase):
    """The 1 MiB bound on what an unauthenticated client may have buffered.
    With 16 KB bulks a single command cannot reach it, so these servers allow
    2 MB bulks before AUTH to test the buffer bound on its own."""

    def start(self, *args):
        server = harness.Server("--requirepass", PASSWORD, "--unauthenticated-max-bulk-len", "2mb",
                                *args)
        server.start()
        self.addCleanup(server.cleanup)
        return server

    def test_one_mebibyte_is_served_one_byte_more_closes(self):
        server = self.start()
        with RespConnection(server.port) as c:
            c.send(command_of_size(MB))
            self.assertEqual(c.read(timeout=30), WRONGPASS)
        with RespConnection(server.port) as c:
            c.send(command_of_size(MB + 1))
            data, closed = c.read_all_until_closed(timeout=30)
            self.assertEqual(data, b"")
            self.assertTrue(closed)
        self.assertIn("unauthenticated-query-buffer-limit", server.log())
        # An authenticated client may send much more.
        with RespConnection(server.port) as c:
            self.assertEqual(c.call("AUTH", PASSWORD), b"OK")
            echo = command_of_size(3 * MB, name="ECHO")
            c.send(echo)
            self.assertEqual(c.read(timeout=30), echo.split(b"\r\n")[4])

    def test_the_bound_is_a_setting(self):
        server = self.start("--unauthenticated-query-buffer-limit", "64kb")
        with RespConnection(server.port) as c:
            c.send(command_of_size(64 * KB))
            self.assertEqual(c.read(timeout=30), WRONGPASS)
        with RespConnection(server.port) as c:
            c.send(command_of_size(64 * KB + 1))
            data, closed = c.read_all_until_closed(timeout=30)
            self.assertEqual((data, closed), (b"", True))


class PasswordSourcesTest(unittest.TestCase):

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="bloomery-security-")
        self.addCleanup(self.tmp.cleanup)

    def write(self, name, content):
        path = os.path.join(self.tmp.name, name)
        with open(path, "w", newline="") as f:
            f.write(content)
        return path

    def start(self, *args, env=None):
        server = harness.Server(*args, env=env)
        server.start()
        self.addCleanup(server.cleanup)
        return server

    def test_requirepass_file_drops_one_trailing_newline(self):
        path = self.write("password", "from-a-file\n")
        server = self.start("--requirepass-file", path)
        with RespConnection(server.port) as c:
            self.assertEqual(c.call("PING"), NOAUTH)
            self.assertEqual(c.call("AUTH", "from-a-file\n"), WRONGPASS)
            self.assertEqual(c.call("AUTH", "from-a-file"), b"OK")
        self.assertNotIn("from-a-file", server.log())

    def test_environment_variable(self):
        server = self.start(env={"BLOOMERY_REQUIREPASS": "from-the-env"})
        with RespConnection(server.port) as c:
            self.assertEqual(c.call("PING"), NOAUTH)
            self.assertEqual(c.call("AUTH", "from-the-env"), b"OK")

    def test_both_sources_refuse_the_start(self):
        path = self.write("password", "a\n")
        for args, env in ((("--requirepass", "b", "--requirepass-file", path), None),
                          (("--requirepass-file", path), {"BLOOMERY_REQUIREPASS": "b"})):
            server = harness.Server(*args, env=env)
            self.addCleanup(server.cleanup)
            server.start(expect_failure=True)
            self.assertNotEqual(server.wait(10), 0)
            self.assertIn("not both", server.log())

    def test_missing_or_empty_file_refuses_the_start(self):
        for path in (os.path.join(self.tmp.name, "missing"), self.write("empty", "\n")):
            server = harness.Server("--requirepass-file", path)
            self.addCleanup(server.cleanup)
            server.start(expect_failure=True)
            self.assertNotEqual(server.wait(10), 0)
            self.assertIn(path, server.log())


class ProtectedModeTest(unittest.TestCase):

    def start(self, *args):
        server = harness.Server(*args)
        server.start()
        self.addCleanup(server.cleanup)
        return server

    def remote(self, server):
        c = RespFrom(server.port, "127.0.0.2")
        self.addCleanup(c.close)
        return c

    def test_no_password_denies_127_0_0_2_and_serves_127_0_0_1(self):
        server = self.start()
        data, closed = self.remote(server).read_all_until_closed()
        self.assertTrue(data.startswith(DENIED_PREFIX), data)
        self.assertTrue(data.endswith(b"\r\n") and data.count(b"\r\n") == 1, data)
        for flag in (b"--protected-mode no", b"--requirepass", b"--bind 127.0.0.1"):
            self.assertIn(flag, data)
        self.assertTrue(closed)
        with RespConnection(server.port) as local:
            self.assertEqual(local.call("PING"), b"PONG")
            stats = local.call("INFO", "stats").decode()
            self.assertIn("rejected_connections:1", stats)

    def test_protected_mode_no_serves_everyone(self):
        server = self.start("--protected-mode", "no")
        self.assertEqual(self.remote(server).call("PING"), b"PONG")

    def test_a_password_lifts_protected_mode(self):
        server = self.start("--requirepass", PASSWORD)
        c = self.remote(server)
        self.assertEqual(c.call("PING"), NOAUTH)
        self.assertEqual(c.call("AUTH", PASSWORD), b"OK")
        self.assertEqual(c.call("PING"), b"PONG")

    def test_an_acl_file_that_leaves_default_without_password_stays_protected(self):
        with tempfile.NamedTemporaryFile("w", suffix=".acl", delete=False) as f:
            f.write("user app on >pw ~* +@all\n")
        self.addCleanup(os.unlink, f.name)
        server = self.start("--aclfile", f.name)
        data, _ = self.remote(server).read_all_until_closed()
        self.assertTrue(data.startswith(DENIED_PREFIX), data)


class AclFileTest(unittest.TestCase):
    """One server with reader / writer / admin users and the default user off."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="bloomery-acl-")
        cls.aclfile = os.path.join(cls.tmp.name, "users.acl")
        with open(cls.aclfile, "w") as f:
            f.write(USERS)
        cls.server = harness.Server("--aclfile", cls.aclfile)
        cls.server.start()

    @classmethod
    def tearDownClass(cls):
        cls.server.cleanup()
        cls.tmp.cleanup()

    def login(self, user, password):
        c = RespConnection(self.server.port)
        self.addCleanup(c.close)
        self.assertEqual(c.call("AUTH", user, password), b"OK")
        return c

    def noperm(self, user, command):
        return Err(b"NOPERM User %s has no permissions to run the '%s' command" % (user, command))

    def test_default_user_off_needs_a_named_login(self):
        with RespConnection(self.server.port) as c:
            self.assertEqual(c.call("PING"), NOAUTH)
            self.assertEqual(c.call("AUTH", "default", "anything"), WRONGPASS)
            self.assertEqual(c.call("AUTH", "reader", "writer-pw"), WRONGPASS)

    def test_reader_may_check_but_not_write(self):
        admin = self.login(b"admin", b"admin-pw")
        self.assertEqual(admin.call("BF.ADD", "pre:k", "seen"), 1)
        reader = self.login(b"reader", b"reader-pw")
        self.assertEqual(reader.call("BF.EXISTS", "pre:k", "seen"), 1)
        self.assertEqual(reader.call("BF.MEXISTS", "pre:k", "seen", "new"), [1, 0])
        info = reader.call("BF.INFO", "pre:k")
        self.assertIsInstance(info, list)
        self.assertEqual(reader.call("BF.ADD", "pre:k", "x"), self.noperm(b"reader", b"bf.add"))
        self.assertEqual(reader.call("FLUSHALL"), self.noperm(b"reader", b"flushall"))
        self.assertEqual(reader.call("CONFIG", "GET", "*"), self.noperm(b"reader", b"config|get"))
        self.assertEqual(admin.call("BF.EXISTS", "pre:k", "x"), 0)

    def test_writer_may_add_but_not_flushall(self):
        writer = self.login(b"writer", b"writer-pw")
        self.assertEqual(writer.call("BF.ADD", "w:k", "a"), 1)
        self.assertEqual(writer.call("BF.EXISTS", "w:k", "a"), 1)
        self.assertEqual(writer.call("FLUSHALL"), self.noperm(b"writer", b"flushall"))
        self.assertEqual(writer.call("SHUTDOWN"), self.noperm(b"writer", b"shutdown"))
        self.assertEqual(self.server.process.poll(), None)

    def test_acl_whoami_users_list_cat(self):
        reader = self.login(b"reader", b"reader-pw")
        self.assertEqual(reader.call("ACL", "WHOAMI"), self.noperm(b"reader", b"acl|whoami"))
        admin = self.login(b"admin", b"admin-pw")
        self.assertEqual(admin.call("ACL", "WHOAMI"), b"admin")
        self.assertEqual(admin.call("ACL", "USERS"), [b"admin", b"default", b"reader", b"writer"])
        listing = admin.call("ACL", "LIST")
        self.assertEqual(len(listing), 4)
        self.assertEqual(listing[1], b"user default off resetchannels -@all")
        self.assertRegex(listing[2].decode(),
                         r"^user reader on #[0-9a-f]{64} ~\* resetchannels -@all \+@read$")
        self.assertRegex(listing[3].decode(),
                         r"^user writer on #[0-9a-f]{64} ~\* resetchannels -@all \+@read \+@write "
                         r"-@dangerous$")
        self.assertFalse(any(b"-pw" in line for line in listing))
        categories = admin.call("ACL", "CAT")
        for name in (b"read", b"write", b"bloom", b"admin", b"dangerous", b"fast", b"slow"):
            self.assertIn(name, categories)
        bloom = admin.call("ACL", "CAT", "bloom")
        self.assertIn(b"bf.add", bloom)
        self.assertIn(b"bf.exists", bloom)
        self.assertNotIn(b"flushall", bloom)
        self.assertIn(b"user=admin", admin.call("CLIENT", "LIST"))

    def test_client_kill_user_closes_that_users_connections_only(self):
        admin = self.login(b"admin", b"admin-pw")
        readers = [self.login(b"reader", b"reader-pw") for _ in range(2)]
        writer = self.login(b"writer", b"writer-pw")
        self.assertEqual(admin.call("CLIENT", "KILL", "USER", "nobody"),
                         Err(b"ERR No such user 'nobody'"))
        # Readers of earlier tests may not be gone yet: at least these two.
        self.assertGreaterEqual(admin.call("CLIENT", "KILL", "USER", "reader"), 2)
        for reader in readers:
            with self.assertRaises((ConnectionError, OSError)):
                reader.call("BF.EXISTS", "k", "a")
        self.assertEqual(writer.call("BF.EXISTS", "k", "a"), 0)
        # SKIPME defaults to yes: the admin's own connection survives its kill.
        self.assertIsInstance(admin.call("CLIENT", "KILL", "USER", "admin"), int)
        self.assertEqual(admin.call("PING"), b"PONG")

    def test_redis_py_and_redis_cli_users(self):
        r = self.server.client(username="reader", password="reader-pw")
        self.addCleanup(r.close)
        self.assertEqual(r.bf().exists("py:missing", "a"), 0)
        with self.assertRaises(redis.exceptions.NoPermissionError):
            r.bf().add("py:k", "a")
        out = run_tool(["redis-cli", "-p", str(self.server.port), "--user", "writer", "--pass",
                        "writer-pw", "--no-auth-warning", "BF.ADD", "cli:k", "a"])
        self.assertEqual(out.stdout, b"1\n", out.stderr)


class AclFileErrorsTest(unittest.TestCase):

    def refused(self, *args):
        server = harness.Server(*args)
        self.addCleanup(server.cleanup)
        server.start(expect_failure=True)
        self.assertNotEqual(server.wait(10), 0)
        return server.log()

    def test_a_malformed_line_refuses_the_start_naming_file_and_line(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "users.acl")
            with open(path, "w") as f:
                f.write("user ok on >pw ~* +@read\n\nuser bad on >pw ~* +@nosuch\n")
            log = self.refused("--aclfile", path)
            self.assertIn(path + ":3: user 'bad': unknown command or category '+@nosuch'", log)
            self.assertIn("refusing to start", log)

    def test_default_in_file_and_requirepass_refuse_the_start(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "users.acl")
            with open(path, "w") as f:
                f.write("user default on >pw ~* +@all\n")
            log = self.refused("--aclfile", path, "--requirepass", "other-secret")
            self.assertIn("defines the default user", log)
            self.assertNotIn("other-secret", log)

    def test_a_missing_file_refuses_the_start(self):
        log = self.refused("--aclfile", "/nonexistent/users.acl")
        self.assertIn("cannot read --aclfile /nonexistent/users.acl", log)


if __name__ == "__main__":
    unittest.main()
