"""TLS on the links a server opens itself (README "Replication", deploy/README
"TLS"): a replica's link to its primary with --tls-replication yes, and
MIGRATE's connection to its target with --tls-cluster yes.

The certificates are test_tls's (its make_certificates, openssl in a
temporary directory): a CA, a server certificate for 127.0.0.1 and a client
certificate it signed, and a self-signed "stranger" certificate no server
trusts. Primaries and targets listen on TLS only (--port 0) and require
client certificates; the replicas and MIGRATE's source keep a plaintext port
for the test to drive them.
"""

import os
import shutil
import socket
import ssl
import tempfile
import threading
import unittest

import redis

import harness
import test_tls
from harness import ServersTestCase, add_range, wait_until


def setUpModule():
    global _cert_dir
    if shutil.which("openssl") is None:
        raise unittest.SkipTest("the openssl command is needed to make test certificates")
    _cert_dir = tempfile.TemporaryDirectory(prefix="bloomery-tls-links-")
    test_tls.CERTS = test_tls.make_certificates(_cert_dir.name)


def tearDownModule():
    _cert_dir.cleanup()


def certs(name):
    return test_tls.CERTS[name]


class TlsOnlyServer(test_tls.TlsServer):
    """A bloomery on a TLS port only, requiring client certificates."""

    def __init__(self, *extra, **kwargs):
        super().__init__(*extra, plaintext=False, auth="yes", **kwargs)

    def client(self, **kwargs):
        return redis.Redis(host="127.0.0.1", port=self.tls_port, ssl=True,
                           ssl_ca_certs=certs("ca.crt"), ssl_certfile=certs("client.crt"),
                           ssl_keyfile=certs("client.key"), socket_timeout=30, **kwargs)


def link_args(ca="ca.crt", client_cert=True):
    """What a server needs to open TLS links: the CA its peers must chain
    to, and the certificate it presents."""
    args = ["--tls-ca-cert-file", certs(ca)]
    if client_cert:
        args += ["--tls-client-cert-file", certs("client.crt"),
                 "--tls-client-key-file", certs("client.key")]
    return args


def tls_replica_of(port, *extra):
    return harness.Server("--replicaof", "127.0.0.1 %d" % port, "--tls-replication", "yes",
                          *extra)


def link_failures(server, text):
    return server.log().count(text)


class FakePrimary:
    """A TLS listener with the self-signed stranger certificate: records
    every connection's handshake outcome and the application bytes read."""

    def __init__(self):
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(8)
        self.listener.settimeout(0.2)
        self.port = self.listener.getsockname()[1]
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.load_cert_chain(certs("stranger.crt"), certs("stranger.key"))
        self.handshakes_failed = 0
        self.handshakes_done = 0
        self.received = b""
        self.lock = threading.Lock()
        self.stopping = False
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self):
        while not self.stopping:
            try:
                conn, _ = self.listener.accept()
            except (socket.timeout, OSError):
                continue
            conn.settimeout(5)
            tls = self.context.wrap_socket(conn, server_side=True, do_handshake_on_connect=False)
            try:
                tls.do_handshake()
            except (ssl.SSLError, OSError):
                with self.lock:
                    self.handshakes_failed += 1
                tls.close()
                continue
            with self.lock:
                self.handshakes_done += 1
            try:
                data = tls.recv(65536)
                with self.lock:
                    self.received += data
            except (ssl.SSLError, OSError):
                pass
            tls.close()

    def failed(self):
        with self.lock:
            return self.handshakes_failed

    def stop(self):
        self.stopping = True
        self.thread.join(timeout=10)
        self.listener.close()


class TlsReplicationTest(ServersTestCase):
    def test_replica_copies_and_follows_a_tls_only_primary(self):
        primary = self.start(TlsOnlyServer())
        p = primary.client()
        p.execute_command("BF.RESERVE", "urls", 0.001, 100000)
        add_range(p, "urls", 0, 20000)  # reaches the replica in the full copy
        replica = self.start(tls_replica_of(primary.tls_port, *link_args()))
        r = replica.client()
        wait_until(lambda: r.info("replication")["master_link_status"] == "up",
                   what="the replica's TLS link")
        state = r.info("replication")
        self.assertEqual(state["master_link_tls"], 1)
        self.assertEqual(state["master_port"], primary.tls_port)
        self.assertEqual(r.config_get("tls-replication")["tls-replication"], "yes")
        self.assertEqual(p.config_get("tls-replication")["tls-replication"], "no")
        # Then the stream: single adds, a new key, a scaling filter.
        for item in range(20000, 20500):
            p.execute_command("BF.ADD", "urls", item)
        p.execute_command("BF.INSERT", "more", "CAPACITY", 100, "ITEMS", *range(1000))
        self.assertEqual(p.execute_command("WAIT", 1, 30000), 1)
        for key in ("urls", "more"):
            self.assertEqual(r.dump(key), p.dump(key), key)
            self.assertEqual(r.execute_command("BF.INFO", key),
                             p.execute_command("BF.INFO", key), key)
        self.assertEqual(p.info("replication")["connected_slaves"], 1)
        self.assertIn("TLS handshake with 127.0.0.1:%d done" % primary.tls_port, replica.log())

    def test_replica_never_syncs_with_a_primary_its_ca_did_not_sign(self):
        primary = self.start(TlsOnlyServer())
        p = primary.client()
        p.execute_command("BF.ADD", "k", "v")
        replica = self.start(tls_replica_of(primary.tls_port, *link_args(ca="stranger.crt")))
        r = replica.client()
        # Failed, and retried: the same clear line at least twice.
        wait_until(lambda: link_failures(replica, "certificate verify failed") >= 2,
                   what=lambda: "two failed handshakes in the replica's log:\n" + replica.log())
        state = r.info("replication")
        self.assertEqual(state["master_link_status"], "down")
        self.assertEqual(state["master_link_tls"], 1)
        self.assertIn("TLS handshake failed", state["master_link_last_error"])
        self.assertIn("(TLS) failed: TLS handshake failed", replica.log())
        with self.assertRaises(redis.ResponseError) as down:
            r.execute_command("BF.EXISTS", "k", "v")
        self.assertIn("MASTERDOWN", str(down.exception))
        self.assertEqual(p.info("replication")["connected_slaves"], 0)
        self.assertEqual(p.info("stats")["sync_full"], 0)

    def test_fake_primary_with_a_self_signed_certificate_receives_nothing(self):
        fake = FakePrimary()
        self.addCleanup(fake.stop)
        replica = self.start(tls_replica_of(fake.port, "--masterauth", "secret-password",
                                            *link_args()))
        wait_until(lambda: fake.failed() >= 2, timeout=30,
                   what="two refused handshakes at the fake primary")
        self.assertEqual(fake.handshakes_done, 0)
        self.assertEqual(fake.received, b"")
        self.assertIn("self-signed certificate", replica.log())
        self.assertNotIn("secret-password", replica.log())
        r = replica.client()
        self.assertEqual(r.info("replication")["master_link_status"], "down")
        self.assertEqual(r.dbsize(), 0)

    def test_replica_without_a_certificate_gets_nothing_from_a_primary_that_requires_one(self):
        primary = self.start(TlsOnlyServer())
        p = primary.client()
        p.execute_command("BF.ADD", "k", "v")
        replica = self.start(tls_replica_of(primary.tls_port, *link_args(client_cert=False)))
        # TLS 1.3: the primary's alert comes after the client's handshake
        # ("TLS: tlsv13 alert certificate required"); TLS 1.2: in it.
        wait_until(lambda: link_failures(replica, "(TLS) failed: TLS") >= 2,
                   what=lambda: "two failed sessions in the replica's log:\n" + replica.log())
        r = replica.client()
        self.assertEqual(r.info("replication")["master_link_status"], "down")
        self.assertEqual(p.info("replication")["connected_slaves"], 0)
        self.assertEqual(p.info("stats")["sync_full"], 0)
        self.assertEqual(r.info("persistence")["loading"], 0)
        with self.assertRaises(redis.ResponseError):
            r.execute_command("BF.EXISTS", "k", "v")

    def test_tls_links_need_a_ca(self):
        server = harness.Server("--tls-replication", "yes")
        self.servers.append(server)
        server.start(expect_failure=True)
        self.assertNotEqual(server.wait(), 0)
        self.assertIn("--tls-replication: verifying the peer's certificate needs "
                      "--tls-ca-cert-file", server.log())


class TlsMigrateTest(ServersTestCase):
    def test_migrate_to_a_tls_only_target(self):
        target = self.start(TlsOnlyServer())
        source = self.start(harness.Server("--tls-cluster", "yes", *link_args()))
        s = source.client()
        s.execute_command("BF.RESERVE", "f", 0.01, 10000)
        add_range(s, "f", 0, 5000)
        payload = s.dump("f")
        self.assertEqual(s.config_get("tls-cluster")["tls-cluster"], "yes")
        self.assertEqual(s.execute_command("MIGRATE", "127.0.0.1", target.tls_port, "f", 0, 5000),
                         b"OK")
        self.assertEqual(s.exists("f"), 0)
        self.assertEqual(target.client().dump("f"), payload)

    def test_migrate_refuses_a_target_its_ca_did_not_sign(self):
        target = self.start(TlsOnlyServer())
        source = self.start(harness.Server("--tls-cluster", "yes",
                                           *link_args(ca="stranger.crt")))
        s = source.client()
        s.execute_command("BF.ADD", "f", "x")
        with self.assertRaises(redis.ResponseError) as refused:
            s.execute_command("MIGRATE", "127.0.0.1", target.tls_port, "f", 0, 5000)
        self.assertIn("IOERR", str(refused.exception))
        self.assertEqual(s.execute_command("BF.EXISTS", "f", "x"), 1)
        self.assertEqual(target.client().exists("f"), 0)
        self.assertIn("certificate verify failed", source.log())


if __name__ == "__main__":
    unittest.main()
