"""TLS: --tls-port beside (or instead of) the plaintext port.

The test makes its own CA, server and client certificates with the openssl
command, then talks to the server with redis-cli --tls, redis-py ssl=True and
Python's ssl module: round trips, client certificates per --tls-auth-clients,
TLS 1.1 refused, plaintext on the TLS port, a handshake that never finishes,
startup errors naming the file, CLIENT LIST / KILL on TLS connections.
"""

import os
import shutil
import socket
import ssl
import subprocess
import tempfile
import time
import unittest
import warnings

import redis

import harness
from test_protocol import RespConnection, encode, parse_reply

CERTS = None  # set by setUpModule: paths of the generated files


def openssl(*args, cwd):
    subprocess.run(["openssl"] + list(args), cwd=cwd, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=60)


def make_certificates(directory):
    """A CA, a server certificate for 127.0.0.1 and a client certificate
    signed by it, and a self-signed client certificate nobody trusts."""
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    openssl("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.crt", "-days", "3",
            "-subj", "/CN=bloomery test CA", cwd=directory)
    for name, usage, alt in (("server", "serverAuth", "subjectAltName=IP:127.0.0.1,DNS:localhost\n"),
                             ("client", "clientAuth", "")):
        with open(os.path.join(directory, name + ".ext"), "w") as f:
            f.write(alt + "extendedKeyUsage=%s\n" % usage)
        openssl("req", *ec, "-keyout", name + ".key", "-out", name + ".csr",
                "-subj", "/CN=bloomery test " + name, cwd=directory)
        openssl("x509", "-req", "-in", name + ".csr", "-CA", "ca.crt", "-CAkey", "ca.key",
                "-CAcreateserial", "-out", name + ".crt", "-days", "3",
                "-extfile", name + ".ext", cwd=directory)
    openssl("req", "-x509", *ec, "-keyout", "stranger.key", "-out", "stranger.crt", "-days", "3",
            "-subj", "/CN=untrusted client", cwd=directory)
    return {name: os.path.join(directory, name) for name in (
        "ca.crt", "server.crt", "server.key", "client.crt", "client.key",
        "stranger.crt", "stranger.key")}


def setUpModule():
    global CERTS, _cert_dir
    if shutil.which("openssl") is None:
        raise unittest.SkipTest("the openssl command is needed to make test certificates")
    _cert_dir = tempfile.TemporaryDirectory(prefix="bloomery-tls-")
    CERTS = make_certificates(_cert_dir.name)


def tearDownModule():
    _cert_dir.cleanup()


def client_context(cert=True, stranger=False):
    context = ssl.create_default_context(cafile=CERTS["ca.crt"])
    context.check_hostname = False  # the certificate names 127.0.0.1; be explicit anyway
    if cert:
        name = "stranger" if stranger else "client"
        context.load_cert_chain(CERTS[name + ".crt"], CERTS[name + ".key"])
    return context


class TlsServer(harness.Server):
    """A bloomery with --tls-port (a fresh free port each start attempt)."""

    def __init__(self, *extra, plaintext=True, auth="yes", tls_files=None, **kwargs):
        super().__init__(*extra, **kwargs)
        self.plaintext = plaintext
        self.auth = auth
        self.tls_files = tls_files
        self.tls_port = None

    def args(self):
        self.tls_port = harness.free_port()
        files = self.tls_files if self.tls_files is not None else ["--tls-cert-file", CERTS["server.crt"],
                                   "--tls-key-file", CERTS["server.key"],
                                   "--tls-ca-cert-file", CERTS["ca.crt"]]
        args = super().args() + ["--tls-port", str(self.tls_port), "--tls-auth-clients", self.auth] + files
        if not self.plaintext:
            args[args.index("--port") + 1] = "0"
        return args

    def ping(self):
        if self.plaintext:
            return super().ping()
        try:
            with tls_connect(self.tls_port, timeout=0.5) as s:
                s.sendall(b"PING\r\n")
                return s.recv(16).startswith(b"+PONG")
        except (OSError, ssl.SSLError):
            return False


def tls_connect(port, timeout=10.0, **context_args):
    raw = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        return client_context(**context_args).wrap_socket(raw, server_hostname="127.0.0.1")
    except BaseException:
        raw.close()
        raise


def call(sock, *args, timeout=10.0):
    """Sends one command, returns its reply; raises ConnectionError if closed."""
    sock.sendall(encode(*args))
    buf = bytearray()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        parsed = parse_reply(buf)
        if parsed is not None:
            return parsed[0]
        data = sock.recv(65536)
        if not data:
            raise ConnectionError("closed by server")
        buf += data
    raise TimeoutError("no reply")


def refused(port, **context_args):
    """True if a TLS client made with these settings cannot run PING."""
    try:
        with tls_connect(port, **context_args) as s:
            return call(s, "PING") != b"PONG"
    except (ssl.SSLError, ConnectionError, OSError):
        return True


class TlsAlongsidePlaintext(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.server = TlsServer()
        cls.server.start()

    @classmethod
    def tearDownClass(cls):
        cls.server.cleanup()

    def redis_cli(self, *args):
        command = ["redis-cli", "--tls", "--cacert", CERTS["ca.crt"], "--cert", CERTS["client.crt"],
                   "--key", CERTS["client.key"], "-h", "127.0.0.1", "-p", str(self.server.tls_port)]
        done = subprocess.run(command + list(args), capture_output=True, timeout=30)
        return done.stdout.decode().strip()

    def test_redis_cli_bf_round_trip_over_tls(self):
        self.assertEqual(self.redis_cli("BF.ADD", "cli", "alpha"), "1")
        self.assertEqual(self.redis_cli("BF.EXISTS", "cli", "alpha"), "1")
        self.assertEqual(self.redis_cli("BF.EXISTS", "cli", "beta"), "0")

    def test_redis_py_bf_round_trip_over_tls(self):
        r = redis.Redis(host="127.0.0.1", port=self.server.tls_port, ssl=True,
                        ssl_ca_certs=CERTS["ca.crt"], ssl_certfile=CERTS["client.crt"],
                        ssl_keyfile=CERTS["client.key"], socket_timeout=30)
        self.addCleanup(r.close)
        self.assertEqual(r.execute_command("BF.RESERVE", "py", 0.01, 1000), b"OK")
        self.assertEqual(r.execute_command("BF.MADD", "py", *["i%d" % i for i in range(200)]), [1] * 200)
        self.assertEqual(r.execute_command("BF.MEXISTS", "py", "i7", "i199"), [1, 1])
        # A reply far larger than one TLS record (16 KB) comes back whole.
        big = b"x" * 300000
        self.assertEqual(r.execute_command("ECHO", big), big)

    def test_plaintext_port_keeps_working_and_shares_the_data(self):
        with tls_connect(self.server.tls_port) as s:
            self.assertEqual(call(s, "BF.ADD", "shared", "a"), 1)
        with RespConnection(self.server.port) as c:
            self.assertEqual(c.call("BF.EXISTS", "shared", "a"), 1)

    def test_client_certificate_required_by_default(self):
        self.assertTrue(refused(self.server.tls_port, cert=False))
        self.assertTrue(refused(self.server.tls_port, stranger=True))
        with tls_connect(self.server.tls_port) as s:
            self.assertEqual(call(s, "PING"), b"PONG")

    def test_plaintext_client_on_the_tls_port_is_closed_and_nothing_else_is_hurt(self):
        with harness.raw_connection(self.server.tls_port, timeout=10) as s:
            s.sendall(b"PING\r\n")
            data = b""
            try:
                while True:
                    chunk = s.recv(4096)
                    if not chunk:
                        break
                    data += chunk
            except ConnectionResetError:
                pass
            self.assertNotIn(b"PONG", data)
        with tls_connect(self.server.tls_port) as s:
            self.assertEqual(call(s, "PING"), b"PONG")
        with RespConnection(self.server.port) as c:
            self.assertEqual(c.call("PING"), b"PONG")

    def test_tls_clients_are_listed_and_can_be_killed(self):
        with tls_connect(self.server.tls_port) as s, RespConnection(self.server.port) as admin:
            tls_id = call(s, "CLIENT", "ID")
            self.assertEqual(call(s, "CLIENT", "SETNAME", "over-tls"), b"OK")
            listing = admin.call("CLIENT", "LIST").decode()
            lines = [l for l in listing.splitlines() if l.startswith("id=%d " % tls_id)]
            self.assertEqual(len(lines), 1, listing)
            self.assertIn(" name=over-tls ", lines[0])
            self.assertIn(" laddr=127.0.0.1:%d " % self.server.tls_port, lines[0])
            self.assertEqual(admin.call("CLIENT", "KILL", "ID", tls_id), 1)
            with self.assertRaises((ConnectionError, ssl.SSLError, OSError)):
                for _ in range(3):  # the first send may still be accepted by the kernel
                    call(s, "PING", timeout=5)

    def test_pipeline_of_many_commands_over_tls_replies_in_order(self):
        with tls_connect(self.server.tls_port) as s:
            s.sendall(b"".join(encode("ECHO", "m%d" % i) for i in range(2000)))
            buf = bytearray()
            replies = []
            pos = 0
            deadline = time.monotonic() + 30
            while len(replies) < 2000 and time.monotonic() < deadline:
                parsed = parse_reply(buf, pos)
                if parsed is None:
                    buf += s.recv(65536)
                    continue
                value, pos = parsed
                replies.append(value)
            self.assertEqual(replies, [b"m%d" % i for i in range(2000)])


class TlsOptions(unittest.TestCase):

    def start(self, *extra, **kwargs):
        server = TlsServer(*extra, **kwargs)
        self.addCleanup(server.cleanup)
        server.start()
        return server

    def test_auth_clients_optional_accepts_no_certificate_but_verifies_one_sent(self):
        server = self.start(auth="optional")
        self.assertFalse(refused(server.tls_port, cert=False))
        self.assertFalse(refused(server.tls_port))
        self.assertTrue(refused(server.tls_port, stranger=True))

    def test_auth_clients_no_accepts_clients_without_certificates(self):
        server = self.start(auth="no", tls_files=["--tls-cert-file", CERTS["server.crt"],
                                                  "--tls-key-file", CERTS["server.key"]])
        self.assertFalse(refused(server.tls_port, cert=False))

    def test_port_0_serves_tls_only(self):
        server = self.start(plaintext=False)
        with tls_connect(server.tls_port) as s:
            self.assertEqual(call(s, "CONFIG", "GET", "port"), [b"port", b"0"])
            self.assertEqual(call(s, "CONFIG", "GET", "tls-port"),
                             [b"tls-port", str(server.tls_port).encode()])
        self.assertIn("port off", server.log())

    def test_handshake_never_finished_is_closed_after_the_timeout(self):
        server = self.start("--tls-handshake-timeout", "0.5")
        with harness.raw_connection(server.tls_port, timeout=60) as idle:
            try:
                data = idle.recv(4096)
            except ConnectionResetError:
                data = b""
            except socket.timeout:
                self.fail("a client that never shakes hands was not closed in 60 s")
            self.assertEqual(data, b"")
        with tls_connect(server.tls_port) as s:
            self.assertEqual(call(s, "PING"), b"PONG")

    def test_tls_1_1_client_is_refused_even_where_openssl_would_allow_it(self):
        # The server's OpenSSL is configured to allow TLS 1.0 at security
        # level 0, so only the server's own minimum can refuse TLS 1.1.
        with tempfile.NamedTemporaryFile("w", suffix=".cnf", delete=False) as conf:
            conf.write("openssl_conf = openssl_init\n[openssl_init]\nssl_conf = ssl_sect\n"
                       "[ssl_sect]\nsystem_default = system_default_sect\n"
                       "[system_default_sect]\nMinProtocol = TLSv1\n"
                       "CipherString = DEFAULT:@SECLEVEL=0\n")
        self.addCleanup(os.unlink, conf.name)
        server = self.start(auth="no", env={"OPENSSL_CONF": conf.name},
                            tls_files=["--tls-cert-file", CERTS["server.crt"],
                                       "--tls-key-file", CERTS["server.key"]])

        def client(max_version):
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            context.load_verify_locations(CERTS["ca.crt"])
            context.check_hostname = False
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)
                context.minimum_version = ssl.TLSVersion.TLSv1
                context.maximum_version = max_version
            context.set_ciphers("DEFAULT:@SECLEVEL=0")
            return context

        def ping(context):
            with socket.create_connection(("127.0.0.1", server.tls_port), timeout=10) as raw:
                with context.wrap_socket(raw) as s:
                    return call(s, "PING"), s.version()

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            tls11 = ssl.TLSVersion.TLSv1_1
        with self.assertRaises(ssl.SSLError):
            ping(client(tls11))
        # The same client allowed TLS 1.2 gets in: the refusal was the version.
        self.assertEqual(ping(client(ssl.TLSVersion.TLSv1_2)), (b"PONG", "TLSv1.2"))

    def assert_refuses_to_start(self, words, **kwargs):
        server = TlsServer(**kwargs)
        self.addCleanup(server.cleanup)
        server.start(expect_failure=True)
        code = server.wait(15)
        log = server.log()
        self.assertGreater(code, 0, log)
        for word in words:
            self.assertIn(word, log)

    def test_missing_certificate_file_stops_the_start_naming_the_file(self):
        missing = os.path.join(_cert_dir.name, "no-such.crt")
        self.assert_refuses_to_start(["--tls-cert-file", missing, "No such file"],
                                     tls_files=["--tls-cert-file", missing,
                                                "--tls-key-file", CERTS["server.key"],
                                                "--tls-ca-cert-file", CERTS["ca.crt"]])

    def test_key_of_another_certificate_stops_the_start(self):
        self.assert_refuses_to_start(["--tls-key-file", CERTS["client.key"], "does not match"],
                                     tls_files=["--tls-cert-file", CERTS["server.crt"],
                                                "--tls-key-file", CERTS["client.key"],
                                                "--tls-ca-cert-file", CERTS["ca.crt"]])

    def test_garbage_ca_file_stops_the_start(self):
        self.assert_refuses_to_start(["--tls-ca-cert-file", CERTS["server.key"]],
                                     tls_files=["--tls-cert-file", CERTS["server.crt"],
                                                "--tls-key-file", CERTS["server.key"],
                                                "--tls-ca-cert-file", CERTS["server.key"]])

    def test_tls_port_without_files_is_a_usage_error(self):
        self.assert_refuses_to_start(["--tls-cert-file"], tls_files=[])


if __name__ == "__main__":
    unittest.main()
