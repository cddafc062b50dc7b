"""Replication across a failover (proto/replication.md, "Answers to PSYNC"):
a replica promoted to primary keeps its old primary's history as its second
id, so the other replicas and the old primary, when they follow it from
exactly the point it had reached, resume (+CONTINUE) instead of copying
everything again; one that holds writes the new primary lacks gets a full
copy, which makes it the new primary's copy again. Every side is compared
bit for bit (BF.SCANDUMP) at the end."""

import os
import signal
import unittest

import redis

from harness import (Server, ServersTestCase, add_range, link_up, replica_of, scandump,
                     wait_until)
from harness import replication_info

KEYS = ["a", "b", "c"]


def stats(server):
    return server.client().info("stats")


def info(server):
    return replication_info(server.client())


class FailoverResync(ServersTestCase):
    def group(self, replicas):
        """A primary with `replicas` replicas whose links are up, holding
        the same items, acknowledged by every replica."""
        primary = self.start(Server())
        followers = [self.start(replica_of(primary)) for _ in range(replicas)]
        for follower in followers:
            wait_until(lambda f=follower: link_up(f), what="a replica's link")
        p = primary.client()
        for key in KEYS:
            add_range(p, key, 0, 5000)
        self.assertEqual(p.execute_command("WAIT", replicas, 10000), replicas)
        return primary, followers

    def follow(self, server, primary):
        client = server.client()
        self.assertEqual(client.execute_command("REPLICAOF", "127.0.0.1", primary.port), b"OK")
        wait_until(lambda: link_up(server) and info(server)["master_port"] == primary.port,
                   what="the link to the new primary")

    def same_everywhere(self, servers):
        first = servers[0].client()
        expected = {key: scandump(first, key) for key in KEYS}
        for server in servers[1:]:
            client = server.client()
            for key in KEYS:
                self.assertEqual(scandump(client, key), expected[key], (server.port, key))

    def promote(self, server):
        self.assertEqual(server.client().execute_command("REPLICAOF", "NO", "ONE"), b"OK")
        wait_until(lambda: info(server)["role"] == "master", what="the promotion")

    def test_the_old_primary_and_the_other_replica_resume_from_the_promoted_one(self):
        primary, (chosen, other) = self.group(2)
        old_replid = info(primary)["master_replid"]
        old_offset = info(primary)["master_repl_offset"]
        self.promote(chosen)
        promoted = info(chosen)
        self.assertEqual(promoted["master_replid2"], old_replid)
        # Where its last change ended: keepalive records may follow.
        self.assertLessEqual(promoted["second_repl_offset"], old_offset)
        self.assertGreater(promoted["second_repl_offset"], old_offset - 1000)
        self.assertNotEqual(promoted["master_replid"], old_replid)

        self.follow(other, chosen)
        self.follow(primary, chosen)
        after = stats(chosen)
        self.assertEqual(after["sync_full"], 0, "nobody needed a full copy")
        self.assertEqual(after["sync_partial_ok"], 2)
        # The new history flows on to both, and both hold every item.
        c = chosen.client()
        for key in KEYS:
            add_range(c, key, 5000, 8000)
        self.assertEqual(c.execute_command("WAIT", 2, 10000), 2)
        # A keepalive PING may be on its way to the follower: wait for it.
        wait_until(lambda: info(primary)["master_repl_offset"]
                   == info(chosen)["master_repl_offset"],
                   what="the old primary at the new one's offset")
        self.same_everywhere([chosen, other, primary])

        # And back: the old primary promoted again continues the history
        # the other two hold.
        before = stats(primary)  # its two full copies of the start
        self.promote(primary)
        self.follow(chosen, primary)
        self.follow(other, primary)
        self.assertEqual(stats(primary)["sync_full"], before["sync_full"])
        self.assertEqual(stats(primary)["sync_partial_ok"], before["sync_partial_ok"] + 2)
        p = primary.client()
        for key in KEYS:
            add_range(p, key, 8000, 9000)
        self.assertEqual(p.execute_command("WAIT", 2, 10000), 2)
        self.same_everywhere([primary, chosen, other])

    def test_an_old_primary_with_writes_the_new_one_lacks_gets_a_full_copy(self):
        primary, (chosen,) = self.group(1)
        self.promote(chosen)
        # Taken by the old primary after the promotion: never on the new one.
        p = primary.client()
        p.execute_command("BF.ADD", "a", "lost-with-the-old-history")
        self.follow(primary, chosen)
        wait_until(lambda: stats(chosen)["sync_full"] == 1, what="a full copy")
        self.assertEqual(stats(chosen)["sync_partial_err"], 1)
        self.same_everywhere([chosen, primary])

    def test_a_replica_behind_the_promoted_one_gets_a_full_copy(self):
        primary, (chosen, behind) = self.group(2)
        # The second replica stops following before the last writes.
        self.promote(behind)
        p = primary.client()
        add_range(p, "a", 5000, 6000)
        self.assertEqual(p.execute_command("WAIT", 1, 10000), 1)
        self.promote(chosen)
        self.follow(behind, chosen)
        wait_until(lambda: stats(chosen)["sync_full"] == 1, what="a full copy")
        self.same_everywhere([chosen, behind])
        self.assertEqual(
            behind.client().execute_command("BF.MEXISTS", "a", *range(5000, 6000)), [1] * 1000)



class MinReplicasToWrite(ServersTestCase):
    """min-replicas-to-write / min-replicas-max-lag, as Redis: writes are
    refused (-NOREPLICAS), not put at risk, while too few replicas
    acknowledge within the lag; reads go on."""

    def test_writes_wait_for_enough_replicas_acknowledging_in_time(self):
        primary = self.start(Server("--min-replicas-to-write", "1",
                                    "--min-replicas-max-lag", "2"))
        p = primary.client()
        with self.assertRaisesRegex(redis.ResponseError,
                                    "^NOREPLICAS Not enough good replicas to write.$"):
            p.execute_command("BF.ADD", "k", "before")
        self.assertEqual(p.execute_command("BF.EXISTS", "k", "before"), 0)
        self.assertEqual(info(primary)["min_slaves_good_slaves"], 0)
        # MULTI: the refused write ends the transaction, as Redis.
        pipe = p.pipeline(transaction=True)
        pipe.execute_command("BF.ADD", "k", "in-multi")
        with self.assertRaises(redis.ResponseError):
            pipe.execute()

        replica = self.start(replica_of(primary))
        wait_until(lambda: info(primary)["min_slaves_good_slaves"] == 1,
                   what="the replica to count")
        self.assertEqual(p.execute_command("BF.ADD", "k", "with-a-replica"), 1)

        # A replica that stops acknowledging stops counting after the lag.
        os.kill(replica.process.pid, signal.SIGSTOP)
        try:
            wait_until(lambda: info(primary)["min_slaves_good_slaves"] == 0, timeout=15,
                       what="the paused replica to stop counting")
            with self.assertRaisesRegex(redis.ResponseError, "^NOREPLICAS"):
                p.execute_command("BF.ADD", "k", "paused")
            # Redis's older name, at run time.
            self.assertEqual(p.execute_command("CONFIG", "SET", "min-slaves-to-write", "0"), b"OK")
            self.assertEqual(p.execute_command("CONFIG", "GET", "min-replicas-to-write"),
                             [b"min-replicas-to-write", b"0"])
            self.assertEqual(p.execute_command("BF.ADD", "k", "not-required"), 1)
            p.execute_command("CONFIG", "SET", "min-replicas-to-write", "1")
        finally:
            os.kill(replica.process.pid, signal.SIGCONT)
        wait_until(lambda: info(primary)["min_slaves_good_slaves"] == 1, timeout=15,
                   what="the resumed replica to count again")
        self.assertEqual(p.execute_command("BF.ADD", "k", "resumed"), 1)
        self.assertEqual(p.execute_command("WAIT", 1, 10000), 1)
        self.assertEqual(replica.client().execute_command("BF.MEXISTS", "k", "with-a-replica",
                                                          "not-required", "resumed"), [1, 1, 1])


if __name__ == "__main__":
    unittest.main()
