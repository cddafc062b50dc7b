"""Replication (README "Replication", proto/replication.md): a primary and
replicas on loopback, driven by redis-py. What each side does against a peer
the test plays by hand (bad answers, stalled snapshots and feeds) is in
test_replication_wire.py.

BLOOMERY_REPLICATION_ITEMS sets how many items the big test adds (default
1,000,000; 200,000 under sanitizers, whose builds are several times slower).
"""

import os
import time
import unittest

import redis

from harness import (BINARY, Server, ServersTestCase, add_range, free_port, link_up, replica_of,
                     scandump, wait_until)
from harness import replication_info as info

SANITIZED = "/asan/" in BINARY or "/tsan/" in BINARY
ITEMS = int(os.environ.get("BLOOMERY_REPLICATION_ITEMS", "200000" if SANITIZED else "1000000"))
BATCH = 1000


def missing(client, key, first, last):
    """How many of first..last-1 answer 0 (a false negative)."""
    count = 0
    pipe = client.pipeline(transaction=False)
    for start in range(first, last, BATCH):
        pipe.execute_command("BF.MEXISTS", key, *range(start, min(start + BATCH, last)))
    for reply in pipe.execute():
        count += sum(1 for found in reply if not found)
    return count


def same_filters(test, primary, replica, keys):
    p, r = primary.client(), replica.client()
    for key in keys:
        test.assertEqual(p.execute_command("BF.INFO", key), r.execute_command("BF.INFO", key), key)
        test.assertEqual(scandump(p, key), scandump(r, key), key)


class ReplicationTest(ServersTestCase):
    def primary_and_replica(self, *primary_args):
        """A primary and one replica whose link is up."""
        primary = self.start(Server(*primary_args))
        replica = self.start(replica_of(primary))
        wait_until(lambda: link_up(replica), what="the replica's link")
        return primary, replica

    def test_two_replicas_hold_every_add_of_a_million(self):
        primary = self.start(Server("--appendfsync", "everysec"))
        p = primary.client()
        # Before the replicas: reaches them in the full synchronization.
        p.execute_command("BF.RESERVE", "urls", 0.001, ITEMS, "NONSCALING")
        add_range(p, "urls", 0, ITEMS // 2)
        p.execute_command("BF.ADD", "gone", "x")
        p.execute_command("BF.ADD", "old-name", "y")
        replicas = [self.start(replica_of(primary)) for _ in range(2)]
        for replica in replicas:
            wait_until(lambda: link_up(replica), what="the replica's link")
        # After: streamed. Keyspace changes too.
        add_range(p, "urls", ITEMS // 2, ITEMS)
        p.delete("gone")
        p.rename("old-name", "new-name")
        p.execute_command("BF.INSERT", "scaling", "CAPACITY", 100, "ITEMS", *range(1000))
        p.expire("new-name", 3600)
        self.assertEqual(p.execute_command("WAIT", 2, 30000), 2)
        for replica in replicas:
            r = replica.client()
            self.assertEqual(missing(r, "urls", 0, ITEMS), 0)
            self.assertEqual(r.exists("gone"), 0)
            self.assertEqual(r.exists("old-name"), 0)
            self.assertEqual(r.execute_command("BF.EXISTS", "new-name", "y"), 1)
            self.assertGreater(r.ttl("new-name"), 3000)
            same_filters(self, primary, replica, ["urls", "new-name", "scaling"])
        def acked_everything():
            # A keepalive PING sent after the last write is acknowledged
            # with the next ack: poll for the moment both are in.
            state = info(p)
            lines = [state["slave%d" % i] for i in range(state["connected_slaves"])]
            return len(lines) == 2 and all(
                line["offset"] == state["master_repl_offset"] for line in lines) and state

        state = wait_until(acked_everything, what="both replicas acknowledging every record")
        for i in range(2):
            line = state["slave%d" % i]
            self.assertEqual(line["state"], "online")
            self.assertIn(line["port"], [replicas[0].port, replicas[1].port])

    def test_replica_refuses_writes_and_reports_its_link(self):
        primary, replica = self.primary_and_replica()
        r = replica.client()
        with self.assertRaises(redis.ResponseError) as refused:
            r.execute_command("BF.ADD", "k", "v")
        self.assertEqual(str(refused.exception),
                         "You can't write against a read only replica.")
        with self.assertRaises(redis.ResponseError) as wait_refused:
            r.execute_command("WAIT", 1, 10)
        self.assertIn("WAIT cannot be used with replica instances", str(wait_refused.exception))
        state = info(r)
        self.assertEqual(state["role"], "slave")
        self.assertEqual(state["master_host"], "127.0.0.1")
        self.assertEqual(state["master_port"], primary.port)
        self.assertEqual(state["master_sync_in_progress"], 0)
        self.assertEqual(r.config_get("replicaof")["replicaof"], "127.0.0.1 %d" % primary.port)
        self.assertEqual(primary.client().config_get("replicaof")["replicaof"], "")
        role = r.execute_command("ROLE")
        self.assertEqual(role[0], b"slave")
        self.assertEqual(role[3], b"connected")
        p = primary.client()
        p_role = p.execute_command("ROLE")
        self.assertEqual(p_role[0], b"master")
        self.assertEqual(p_role[2][0][1], str(replica.port).encode())
        clients = p.execute_command("CLIENT", "LIST").decode()
        self.assertIn("flags=S", clients)
        # WAIT with a timeout returns the count when too few acknowledge.
        p.execute_command("BF.ADD", "k", "v")
        started = time.monotonic()
        self.assertEqual(p.execute_command("WAIT", 2, 300), 1)
        self.assertGreaterEqual(time.monotonic() - started, 0.25)
        self.assertEqual(p.execute_command("WAIT", 0, 0), 1)
        with self.assertRaises(redis.ResponseError):
            p.execute_command("WAIT", 1, -1)

    def test_a_primary_without_journal_refuses_replicas(self):
        primary = self.start(Server("--appendonly", "no"))
        with self.assertRaises(redis.ResponseError) as refused:
            primary.client().execute_command("PSYNC", "?", -1)
        self.assertIn("--appendonly no", str(refused.exception))
        self.assertEqual(primary.client().execute_command("WAIT", 1, 50), 0)

    def test_replica_killed_and_restarted_catches_up(self):
        primary, replica = self.primary_and_replica()
        p = primary.client()
        add_range(p, "k", 0, 20000)
        self.assertEqual(p.execute_command("WAIT", 1, 10000), 1)
        replica.kill()
        add_range(p, "k", 20000, 40000)  # while it is down
        replica.start()
        wait_until(lambda: link_up(replica), what="the restarted replica's link")
        add_range(p, "k", 40000, 60000)
        self.assertEqual(p.execute_command("WAIT", 1, 10000), 1)
        self.assertEqual(missing(replica.client(), "k", 0, 60000), 0)
        same_filters(self, primary, replica, ["k"])

    def test_a_cut_link_resumes_from_its_offset(self):
        primary, replica = self.primary_and_replica()
        p = primary.client()
        add_range(p, "k", 0, 10000)
        self.assertEqual(p.execute_command("WAIT", 1, 10000), 1)
        # Redis keeps the sync counters in INFO stats.
        before = p.info("stats")
        self.assertEqual(before["sync_full"], 1)
        # Cut the link from the primary's side; the replica reconnects.
        for line in p.execute_command("CLIENT", "LIST").decode().splitlines():
            if "flags=S" in line:
                address = [f for f in line.split() if f.startswith("addr=")][0][5:]
                p.execute_command("CLIENT", "KILL", address)
        add_range(p, "k", 10000, 20000)
        wait_until(lambda: info(p)["connected_slaves"] == 1 and link_up(replica),
                   what="the link to come back")
        self.assertEqual(p.execute_command("WAIT", 1, 10000), 1)
        after = p.info("stats")
        self.assertEqual(after["sync_full"], 1, "a cut link must not need a full copy")
        self.assertEqual(after["sync_partial_ok"], before["sync_partial_ok"] + 1)
        self.assertEqual(missing(replica.client(), "k", 0, 20000), 0)
        same_filters(self, primary, replica, ["k"])

    def test_promoted_replica_holds_every_add_wait_acknowledged(self):
        primary, replica = self.primary_and_replica("--appendfsync", "always")
        p = primary.client()
        acknowledged = 0
        for start in range(0, 30000, 500):
            p.execute_command("BF.MADD", "k", *range(start, start + 500))
            if p.execute_command("WAIT", 1, 5000) >= 1:
                acknowledged = start + 500
        self.assertEqual(acknowledged, 30000)
        primary.kill()
        r = replica.client()
        self.assertEqual(r.execute_command("REPLICAOF", "NO", "ONE"), b"OK")
        self.assertEqual(info(r)["role"], "master")
        self.assertEqual(missing(r, "k", 0, acknowledged), 0)
        # It takes writes now, journaled: they survive its own crash.
        r.execute_command("BF.ADD", "after", "promotion")
        # everysec wrote it before the reply: a kill right after keeps it.
        replica.kill()
        replica.extra_args = []  # restarted as the primary it now is
        replica.start()
        r = replica.client()
        self.assertEqual(info(r)["role"], "master")
        self.assertEqual(missing(r, "k", 0, acknowledged), 0)
        self.assertEqual(r.execute_command("BF.EXISTS", "after", "promotion"), 1)

    def test_replicaof_at_run_time_replaces_the_data_and_no_one_keeps_it(self):
        primary = self.start(Server())
        other = self.start(Server())
        primary.client().execute_command("BF.ADD", "from-primary", "x")
        o = other.client()
        o.execute_command("BF.ADD", "only-here", "y")
        self.assertEqual(o.execute_command("REPLICAOF", "127.0.0.1", primary.port), b"OK")
        wait_until(lambda: link_up(other), what="the new replica's link")
        self.assertEqual(o.exists("only-here"), 0)
        self.assertEqual(o.execute_command("BF.EXISTS", "from-primary", "x"), 1)
        self.assertEqual(o.execute_command("REPLICAOF", "NO", "ONE"), b"OK")
        o.execute_command("BF.ADD", "mine-again", "z")
        self.assertEqual(o.execute_command("BF.EXISTS", "from-primary", "x"), 1)
        with self.assertRaises(redis.ResponseError):
            o.execute_command("REPLICAOF", "127.0.0.1", "notaport")

    def test_replicaof_is_refused_in_cluster_mode(self):
        # The slot map says who replicates whom; REPLICAOF at run time would
        # drop the slots this node serves.
        port = free_port()
        node = self.start(Server("--cluster-enabled", "yes", "--cluster-slots",
                                 "0-16383=127.0.0.1:%d" % port, "--cluster-self",
                                 "127.0.0.1:%d" % port, port=port))
        primary = self.start(Server())
        c = node.client()
        c.execute_command("BF.ADD", "k", "v")
        for args in (("127.0.0.1", primary.port), ("NO", "ONE")):
            for command in ("REPLICAOF", "SLAVEOF"):
                with self.assertRaises(redis.ResponseError) as refused:
                    c.execute_command(command, *args)
                self.assertEqual(str(refused.exception), "REPLICAOF not allowed in cluster mode.")
        self.assertEqual(info(c)["role"], "master")
        self.assertEqual(c.execute_command("BF.EXISTS", "k", "v"), 1)
        self.assertEqual(c.execute_command("BF.ADD", "k", "w"), 1)

    def test_password_protected_primary(self):
        primary = self.start(Server("--requirepass", "s3cret"))
        p = primary.client(password="s3cret")
        p.execute_command("BF.ADD", "k", "v")
        wrong = self.start(replica_of(primary, "--masterauth", "nope"))
        wait_until(lambda: "AUTH" in info(wrong.client())["master_link_last_error"],
                   what="the refused link's error")
        self.assertEqual(info(wrong.client())["master_link_status"], "down")
        right = self.start(replica_of(primary, "--masterauth", "s3cret"))
        wait_until(lambda: link_up(right), what="the authenticated link")
        self.assertEqual(right.client().execute_command("BF.EXISTS", "k", "v"), 1)

    def test_replicaof_naming_this_server_starts_it_as_the_primary(self):
        # A StatefulSet gives every pod "--replicaof bloomery-0... 6379";
        # pod 0 must serve as the primary, not replicate itself.
        port = free_port()
        server = self.start(Server("--replicaof", "127.0.0.1 %d" % port, port=port))
        c = server.client()
        self.assertEqual(info(c)["role"], "master")
        self.assertEqual(c.execute_command("BF.ADD", "k", "v"), 1)
        self.assertIn("names this server", server.log())

    def test_metrics_report_replication(self):
        import urllib.request
        from prometheus_client.parser import text_string_to_metric_families

        def scrape(port):
            with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=10) as r:
                families = text_string_to_metric_families(r.read().decode())
            return {s.name + repr(sorted(s.labels.items())): s.value
                    for family in families for s in family.samples}

        primary_metrics, replica_metrics = free_port(), free_port()
        primary = self.start(Server("--metrics-port", str(primary_metrics)))
        replica = self.start(replica_of(primary, "--metrics-port", str(replica_metrics)))
        wait_until(lambda: link_up(replica), what="the replica's link")
        primary.client().execute_command("BF.MADD", "k", *range(100))
        self.assertEqual(primary.client().execute_command("WAIT", 1, 5000), 1)
        label = [("replica", "127.0.0.1:%d" % replica.port)]
        # The primary's own records (its pings to replicas) may move its
        # offset after WAIT returned: scrapes of both sides taken while the
        # replica holds, and has acknowledged, all of it.
        scraped = {}

        def caught_up():
            scraped["p"] = scrape(primary_metrics)
            scraped["r"] = scrape(replica_metrics)
            offset = scraped["p"]["bloomery_replication_offset[]"]
            return (scraped["p"]["bloomery_replication_replica_acked_offset" + repr(label)] ==
                    offset and scraped["r"]["bloomery_replication_offset[]"] == offset)

        wait_until(caught_up, what="the replica to hold and acknowledge the primary's offset")
        p, r = scraped["p"], scraped["r"]
        self.assertEqual(p["bloomery_replication_is_replica[]"], 0)
        self.assertEqual(p["bloomery_replication_connected_replicas[]"], 1)
        self.assertEqual(p["bloomery_replication_replica_acked_offset" + repr(label)],
                         p["bloomery_replication_offset[]"])
        self.assertEqual(p["bloomery_replication_replica_lag_bytes" + repr(label)], 0)
        self.assertEqual(p["bloomery_replication_full_syncs_total[]"], 1)
        self.assertEqual(r["bloomery_replication_is_replica[]"], 1)
        self.assertEqual(r["bloomery_replication_link_up[]"], 1)
        self.assertEqual(r["bloomery_replication_offset[]"], p["bloomery_replication_offset[]"])

    def test_a_replica_never_answers_from_data_it_has_not_synchronized(self):
        # Before its first copy a replica's data (empty, or old files) would
        # answer 0 for items its primary holds: it refuses, and /readyz says 503.
        import urllib.error
        import urllib.request
        nowhere = free_port()
        metrics = free_port()
        replica = self.start(Server("--replicaof", "127.0.0.1 %d" % nowhere,
                                    "--metrics-port", str(metrics)))
        r = replica.client()
        with self.assertRaises(redis.ResponseError) as refused:
            r.execute_command("BF.EXISTS", "k", "v")
        self.assertIn("MASTERDOWN", str(refused.exception))
        self.assertEqual(r.ping(), True)
        with self.assertRaises(urllib.error.HTTPError) as not_ready:
            urllib.request.urlopen("http://127.0.0.1:%d/readyz" % metrics, timeout=10)
        self.assertEqual(not_ready.exception.code, 503)
        # Once synchronized it serves, also with the link down again
        # (replica-serve-stale-data yes, as Redis), unless told not to.
        primary = self.start(Server())
        primary.client().execute_command("BF.ADD", "k", "v")
        strict = self.start(replica_of(primary, "--replica-serve-stale-data", "no"))
        self.assertEqual(r.execute_command("REPLICAOF", "127.0.0.1", primary.port), b"OK")
        wait_until(lambda: link_up(replica) and link_up(strict), what="both links")
        self.assertEqual(r.execute_command("BF.EXISTS", "k", "v"), 1)
        with urllib.request.urlopen("http://127.0.0.1:%d/readyz" % metrics, timeout=10) as ok:
            self.assertEqual(ok.status, 200)
        primary.kill()
        wait_until(lambda: not link_up(replica) and not link_up(strict), what="links down")
        self.assertEqual(r.execute_command("BF.EXISTS", "k", "v"), 1)
        with self.assertRaises(redis.ResponseError) as stale:
            strict.client().execute_command("BF.EXISTS", "k", "v")
        self.assertIn("replica-serve-stale-data is set to 'no'", str(stale.exception))

    def test_info_answers_while_replicaof_waits_for_a_link_to_stop(self):
        # Stopping a link waits for a snapshot load in progress; REPLICAOF
        # once did that holding the lock INFO, ROLE and /metrics take.
        from concurrent.futures import ThreadPoolExecutor
        primary = self.start(Server())
        # 825 MB, items in nearly every region of it (a snapshot holds only
        # the regions items touched): a load of 0.5 to 2 s on the 2-core VM.
        primary.client().execute_command("BF.RESERVE", "big", "0.0001", "300000000",
                                         "NONSCALING")
        add_range(primary.client(), "big", 0, 500000, batch=10000)
        other = self.start(Server())
        replica = self.start(Server())
        r = replica.client()
        for round, replace in enumerate((("127.0.0.1", other.port), ("NO", "ONE"))):
            self.assertEqual(r.execute_command("REPLICAOF", "127.0.0.1", primary.port), b"OK")
            # The primary writes and sends 825 MB first: minutes under TSan.
            wait_until(lambda: replica.log().count("loading it") > round,
                       timeout=300, what="the load to begin")
            # INFO in a loop while REPLICAOF waits for the load to end. Had
            # INFO waited behind it, no INFO sent in the second half of
            # REPLICAOF's wait would have finished before REPLICAOF did.
            answered = []  # (sent, answered) of each INFO
            replica_client = replica.client()

            def replace_link():
                reply = replica_client.execute_command("REPLICAOF", *replace)
                return reply, time.monotonic()
            with ThreadPoolExecutor(1) as pool:
                sent = time.monotonic()
                replaced = pool.submit(replace_link)
                while not replaced.done() or not answered:
                    started = time.monotonic()
                    self.assertIn(info(r)["role"], ("master", "slave"))
                    answered.append((started, time.monotonic()))
                reply, replaced_at = replaced.result()
                self.assertEqual(reply, b"OK")
            halfway = sent + (replaced_at - sent) / 2
            # A REPLICAOF that found the load already over did not wait, and
            # says nothing about INFO.
            waited = replaced_at - sent
            self.assertTrue(
                waited < 0.1 or any(started >= halfway and done < replaced_at
                                    for started, done in answered),
                "no INFO answered while REPLICAOF waited (%.2f s; INFO took at most %.2f s)"
                % (waited, max(done - started for started, done in answered)))
            if replace[0] == "NO":
                # Answered once the link stopped: writes are taken at once.
                self.assertEqual(info(r)["role"], "master")
                self.assertEqual(r.execute_command("BF.ADD", "after", "promotion"), 1)
            else:
                # Until it has a copy of the other primary, what the link
                # replaced loaded is never served.
                def linked_and_never_served():
                    if link_up(replica):
                        return True
                    try:
                        self.assertEqual(r.execute_command("BF.EXISTS", "big", "x"), 0)
                    except redis.BusyLoadingError:
                        pass  # -LOADING: the other primary's copy is loading
                    except redis.ResponseError as refused:
                        self.assertRegex(str(refused), "^MASTERDOWN ")
                    return False
                wait_until(linked_and_never_served, 300, "the link to the other primary",
                           interval=0)
                self.assertEqual(r.exists("big"), 0)

    def test_shutdown_waits_for_replicas_to_acknowledge_every_write(self):
        primary, replica = self.primary_and_replica()
        p = primary.client()
        # Writes and SHUTDOWN in one pipeline: every write is answered before
        # SHUTDOWN runs, and the replica is still behind when it does.
        pipe = p.pipeline(transaction=False)
        for start in range(0, 200000, BATCH):
            pipe.execute_command("BF.MADD", "k", *range(start, start + BATCH))
        pipe.execute_command("SHUTDOWN", "NOSAVE")
        try:
            pipe.execute()
        except redis.ConnectionError:
            pass
        self.assertEqual(primary.wait(30), 0, primary.log())
        self.assertEqual(missing(replica.client(), "k", 0, 200000), 0)


if __name__ == "__main__":
    unittest.main()
