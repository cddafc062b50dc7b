"""Debian's prometheus-redis-exporter (oliver006/redis_exporter) scraping
bloomery: no scrape error, and the metric names it produces for Redis 7.0 with
RedisBloom after the same workload (fixtures/redis_exporter_metrics.txt,
recorded with tests/tools/exporter_metrics.py), but for the names listed in
MUST_DIFFER with their reasons.

Skipped when the exporter is not installed; `make test-deps` (and CI)
installs it.
"""

import os
import sys
import unittest

import harness

sys.path.insert(0, os.path.join(harness.ROOT, "tests", "tools"))
import exporter_metrics  # noqa: E402

FIXTURE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures",
                       "redis_exporter_metrics.txt")

# Names the exporter gives Redis with RedisBloom and not bloomery (or the
# other way round), and why.
JOURNAL = ("bloomery's journal is on by default (--appendonly yes) and Redis's AOF is off by "
           "default: INFO persistence has the fields Redis shows with appendonly yes")
MUST_DIFFER = {
    "redis_aof_base_size_bytes": JOURNAL,
    "redis_aof_buffer_length": JOURNAL,
    "redis_aof_current_size_bytes": JOURNAL,
    "redis_aof_delayed_fsync": JOURNAL,
    "redis_aof_pending_bio_fsync": JOURNAL,
    "redis_aof_pending_rewrite": JOURNAL,
}


@unittest.skipUnless(exporter_metrics.exporter_binary(),
                     "prometheus-redis-exporter is not installed (make test-deps)")
class RedisExporterTest(unittest.TestCase):

    def test_scrapes_without_error_and_with_redis_s_metric_names(self):
        with harness.Server() as server:
            address = "127.0.0.1:%d" % server.port
            exporter_metrics.workload(address)
            text = exporter_metrics.scrape(address, port=harness.free_port())
        self.assertIn("\nredis_up 1\n", text)
        self.assertIn('\nredis_exporter_last_scrape_error{err=""} 0\n', text)
        # The exporter read every section it knows: instance info, keyspace,
        # commands, errors, latency spikes and the slow log, with values.
        for sample in ('redis_db_keys{db="db0"} 3', 'redis_db_keys_expiring{db="db0"} 1',
                       'redis_errors_total{err="ERR"} 1', 'redis_errors_total{err="Invalid"} 1',
                       'redis_config_maxclients 10000', 'redis_connected_clients 1'):
            self.assertIn("\n" + sample + "\n", text)
        self.assertRegex(text, r'\nredis_latency_spike_duration_seconds\{event_name="[a-z-]*command"\}')
        self.assertRegex(text, r'\nredis_commands_total\{cmd="bf\.madd"\} 1\n')
        with open(FIXTURE) as f:
            expected = set(f.read().split())
        names = set(exporter_metrics.metric_names(text))
        missing = sorted(expected - names - set(MUST_DIFFER))
        extra = sorted(names - expected - set(MUST_DIFFER))
        # Each listed difference is one still (a name both have is no
        # difference to explain).
        self.assertEqual(sorted(name for name in MUST_DIFFER if (name in names) == (name in expected)), [])
        self.assertEqual(missing, [], "metrics Redis with RedisBloom has and bloomery lacks")
        self.assertEqual(extra, [], "metrics bloomery has and Redis with RedisBloom lacks")


if __name__ == "__main__":
    unittest.main()
