"""The --config file never drops a setting silently: both syntaxes it reads
(`key = value` and redis.conf's `key value`), `include`, and the refusal,
by file and line, of every key no option has, checked with
`bloomery --test-config` and a briefly started server; and BLOOMERY_*
variables no option reads, which are warned about, not refused.
"""

import os
import re
import subprocess
import tempfile
import unittest

import redis

import harness


def write(directory, name, text):
    path = os.path.join(directory, name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
    return path


def test_config(directory, config, env=None):
    """bloomery --test-config --config CONFIG (none if CONFIG is None), run in
    `directory` (so that messages name the file as given); (exit code,
    stdout + stderr)."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("BLOOMERY_")}
    environment.update(env or {})
    result = subprocess.run(
        [harness.BINARY, "--test-config", "--dir", os.path.join(directory, "data")] +
        ([] if config is None else ["--config", config]),
        cwd=directory, env=environment, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        timeout=60)
    return result.returncode, result.stdout.decode("utf-8", "replace")


def reported(output, name):
    """The value --test-config reports for `name` ("listen", "data", ...)."""
    for line in output.splitlines():
        if line.strip().startswith(name + ":"):
            return line.split(":", 1)[1].strip()
    return None


class ConfigFileTest(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory(prefix="bloomery-config-")
        self.dir = self._tmp.name

    def tearDown(self):
        self._tmp.cleanup()

    def assert_refused(self, config, *messages, env=None):
        code, output = test_config(self.dir, config, env=env)
        self.assertEqual(code, 1, output)
        self.assertIn("configuration invalid", output)
        self.assertNotIn("configuration OK", output)
        for message in messages:
            self.assertIn(message, output)
        return output

    def test_a_misspelled_key_is_refused_with_file_line_and_nearest_key(self):
        write(self.dir, "c.conf", 'port = 22060\nrequirepas = "s3cret"\n')
        output = self.assert_refused(
            "c.conf", "c.conf:2: unknown setting 'requirepas' (did you mean 'requirepass'?)")
        self.assertNotIn("s3cret", output)  # a value is never echoed
        # Far from every key: no guess, a pointer to the list.
        write(self.dir, "far.conf", "port 22060\nfrobnicate yes\n")
        self.assert_refused("far.conf", "far.conf:2: unknown setting 'frobnicate' "
                            "(bloomery --help lists the settings)")

    def test_a_misspelled_key_refuses_the_start(self):
        config = write(self.dir, "c.conf", "requirepas s3cret\n")
        server = harness.Server("--config", config)
        try:
            server.start(expect_failure=True)
            self.assertIsNotNone(server.process.poll(), "started with a misspelled key")
            self.assertNotEqual(server.process.returncode, 0)
            self.assertIn(config + ":1: unknown setting 'requirepas' "
                          "(did you mean 'requirepass'?)", server.log())
        finally:
            server.cleanup()

    def test_redis_conf_lines_are_read_as_redis_reads_them(self):
        write(self.dir, "redis.conf",
              "# copied from a redis.conf\n"
              "port 22060\n"
              "requirepass s3cret\n"
              "save 900 1\n"
              "save 300 10\n"
              "client-output-buffer-limit normal 0 0 0\n"
              "client-output-buffer-limit pubsub 32mb 8mb 60\n"
              "appendonly no\n"
              "maxmemory 100mb\n"
              "replicaof 127.0.0.1 6390\n"
              "PROTECTED-MODE yes\n")
        code, output = test_config(self.dir, "redis.conf")
        self.assertEqual(code, 0, output)
        self.assertIn("configuration OK", output)
        self.assertIn("port 22060", reported(output, "listen"))
        self.assertEqual(reported(output, "access"), "password for the default user")
        self.assertIn("save '900 1 300 10'", reported(output, "data"))  # lines add up
        self.assertIn("pubsub 33554432 8388608 60", reported(output, "output buffers"))
        self.assertEqual(reported(output, "journal"), "off")
        self.assertEqual(reported(output, "maxmemory"), "104857600 bytes")
        self.assertEqual(reported(output, "replication"), "replica of 127.0.0.1 6390")
        # `save ""` clears the points before it; a later key replaces an
        # earlier one.
        write(self.dir, "again.conf", 'save 900 1\nsave ""\nport 22060\nport 22061\n')
        code, output = test_config(self.dir, "again.conf")
        self.assertEqual(code, 0, output)
        self.assertIn("save ''", reported(output, "data"))
        self.assertIn("port 22061", reported(output, "listen"))

    def test_a_redis_conf_password_guards_the_server(self):
        config = write(self.dir, "redis.conf",
                       'requirepass "s3 cret"   \nslowlog-max-len 7\n')
        with harness.Server("--config", config) as server:
            with self.assertRaises(redis.exceptions.AuthenticationError):
                server.client().ping()
            client = server.client(password="s3 cret")
            self.assertTrue(client.ping())
            self.assertEqual(client.config_get("slowlog-max-len")["slowlog-max-len"], "7")

    def test_quotes_and_comments_in_both_forms(self):
        config = write(self.dir, "c.conf",
                       '# a comment line\n'
                       '; an INI comment line\n'
                       'requirepass = "a#b\\"c"   # the password\n'
                       "dbfilename 'x #y.bloomery'\n"
                       'save = ["900 1", "300 10"]\n'
                       "bf-error-rate = 0.001 # per filter\n")
        code, output = test_config(self.dir, "c.conf")
        self.assertEqual(code, 0, output)
        self.assertIn("snapshot x #y.bloomery, save '900 1 300 10'", reported(output, "data"))
        with harness.Server("--config", config) as server:
            self.assertTrue(server.client(password='a#b"c').ping())

    def test_redis_directives_bloomery_lacks_are_refused_by_name(self):
        write(self.dir, "redis.conf",
              "databases 16\n"
              "loadmodule /usr/lib/redis/modules/redisbloom.so\n"
              "slaveof 10.0.0.1 6379\n"
              "maxmemory-policy allkeys-lru\n"
              "appendonyl yes\n"
              "tcp-keepalive 300\n")
        self.assert_refused(
            "redis.conf",
            "redis.conf:1: unknown setting 'databases' (a Redis setting with no meaning in "
            "bloomery)",
            "redis.conf:2: unknown setting 'loadmodule' (bloomery has the BF.* commands built in",
            "redis.conf:3: unknown setting 'slaveof' (Redis's old name of 'replicaof')",
            "redis.conf:4: unknown setting 'maxmemory-policy' (bloomery evicts nothing",
            "redis.conf:5: unknown setting 'appendonyl' (did you mean 'appendonly'?)",
            "redis.conf:6: unknown setting 'tcp-keepalive' (a Redis setting")

    def test_values_the_key_cannot_take_are_refused(self):
        write(self.dir, "c.conf",
              "bind 127.0.0.1 -::1\n"
              "requirepass two words\n"
              'masterauth "unbalanced\n'
              "port\n"
              "[server]\n"
              'dir = "a\\qb"\n'
              "save 900 1 # hourly\n")
        output = self.assert_refused(
            "c.conf",
            "c.conf:1: 'bind' takes one value, got 2 words",
            "c.conf:2: 'requirepass' takes one value, got 2 words",
            "c.conf:3: unbalanced quotes in the value of 'masterauth'",
            "c.conf:4: 'port' needs a value",
            "c.conf:5: sections are not supported",
            "c.conf:6: unknown escape (a backslash takes n, r, t, b, a, f, \\, \", ' or xHH) "
            "in the value of 'dir'",
            "c.conf:7: '#' after a value is no comment in the 'key value' form, as in Redis")
        self.assertNotIn("two words", output)  # a value is never echoed

    def test_include_reads_files_relative_to_the_including_file(self):
        write(self.dir, "etc/bloomery.conf",
              "include conf.d/base.conf\n"
              "port = 22061\n")
        write(self.dir, "etc/conf.d/base.conf",
              "port 22000\n"
              "include secret.conf\n"
              "save 900 1\n")
        write(self.dir, "etc/conf.d/secret.conf", "requirepass s3cret\n")
        code, output = test_config(self.dir, "etc/bloomery.conf")
        self.assertEqual(code, 0, output)
        self.assertIn("port 22061", reported(output, "listen"))  # the later line wins
        self.assertEqual(reported(output, "access"), "password for the default user")
        self.assertIn("save '900 1'", reported(output, "data"))
        # A key an included file misspells is named with that file's path.
        write(self.dir, "etc/conf.d/secret.conf", "\nrequirepas s3cret\n")
        self.assert_refused("etc/bloomery.conf",
                            "etc/conf.d/secret.conf:2: unknown setting 'requirepas'")

    def test_include_refuses_cycles_missing_files_and_depth(self):
        write(self.dir, "a.conf", "include b.conf\n")
        write(self.dir, "b.conf", "port 22060\ninclude a.conf\n")
        self.assert_refused("a.conf", "b.conf:2: include cycle: a.conf is already being read")
        write(self.dir, "m.conf", "port 22060\n\ninclude missing.conf\n")
        self.assert_refused("m.conf",
                            "m.conf:3: cannot include missing.conf: No such file or directory")
        write(self.dir, "d.conf", "include\n")
        self.assert_refused("d.conf", "d.conf:1: include takes one file name")
        for depth in range(12):
            write(self.dir, "n%d.conf" % depth, "include n%d.conf\n" % (depth + 1))
        write(self.dir, "n12.conf", "port 22060\n")
        output = self.assert_refused("n0.conf", "includes nested more than 8 deep")
        self.assertEqual(len(re.findall("nested more than", output)), 1, output)

    def test_the_shipped_example_and_a_toml_file_still_pass(self):
        example = os.path.join(harness.ROOT, "deploy", "bloomery.conf")
        code, output = test_config(self.dir, example)
        self.assertEqual(code, 0, output)
        self.assertIn("save '3600 1 300 100 60 10000'", reported(output, "data"))
        # And a file that sets nothing but is not empty is fine.
        write(self.dir, "empty.conf", "# nothing\n\n[default]\n")
        code, output = test_config(self.dir, "empty.conf")
        self.assertEqual(code, 0, output)
        # ...while a Redis section name is not the top level.
        write(self.dir, "sectioned.conf", "[redis]\nport 22060\n")
        self.assert_refused("sectioned.conf", "sectioned.conf:1: sections are not supported")

    def test_bloomery_config_names_a_file_that_is_read(self):
        write(self.dir, "env.conf", "port = 22060\n")
        code, output = test_config(self.dir, None, env={"BLOOMERY_CONFIG": "env.conf"})
        self.assertEqual(code, 0, output)
        self.assertIn("port 22060", reported(output, "listen"))
        self.assertEqual(reported(output, "config file"), "env.conf")
        # --config wins over it, as every flag over the environment.
        write(self.dir, "flag.conf", "port = 22061\n")
        code, output = test_config(self.dir, "flag.conf", env={"BLOOMERY_CONFIG": "env.conf"})
        self.assertIn("port 22061", reported(output, "listen"))
        # A file it names that is missing is an error, as with --config.
        write(self.dir, "bad.conf", "requirepas = x\n")
        self.assert_refused(None, "bad.conf:1: unknown setting 'requirepas'",
                            env={"BLOOMERY_CONFIG": "bad.conf"})
        self.assert_refused(None, "missing.conf", env={"BLOOMERY_CONFIG": "missing.conf"})

    def test_environment_near_misses_are_warned_about_and_others_ignored(self):
        write(self.dir, "c.conf", "port 22060\n")
        code, output = test_config(self.dir, "c.conf", env={
            "BLOOMERY_REQUIREPAS": "s3cret",
            # What Kubernetes sets for a Service named bloomery: not ours,
            # and not near any of ours.
            "BLOOMERY_SERVICE_HOST": "10.0.0.1",
            "BLOOMERY_PORT_6379_TCP_ADDR": "10.0.0.1",
        })
        self.assertEqual(code, 0, output)  # the environment is shared: not refused
        self.assertIn("configuration OK", output)
        self.assertIn("warning: environment: BLOOMERY_REQUIREPAS is not a setting and is "
                      "ignored (did you mean BLOOMERY_REQUIREPASS?)", output)
        self.assertNotIn("s3cret", output)
        self.assertNotIn("SERVICE_HOST", output)
        self.assertNotIn("6379_TCP", output)
        self.assertEqual(reported(output, "access"), "no password: loopback clients only")

    def test_every_bad_value_is_reported_not_only_the_first(self):
        write(self.dir, "c.conf", "port 70000\nbf-error-rate 2\nsave 1\n")
        self.assert_refused(
            "c.conf",
            "--port: must be an integer between 0 and 65535 inclusive, got '70000'",
            "--bf-error-rate: must be a number between 1e-15 and 0.999999 inclusive, got '2'",
            "--save: save needs pairs of 'SECONDS CHANGES', got '1'",
            "--threads: must be an integer between 0 and 256 inclusive, got '1000'",
            "--appendfsync: sometimes not in {always,everysec,no}",
            env={"BLOOMERY_THREADS": "1000", "BLOOMERY_APPENDFSYNC": "sometimes"})

    def test_a_data_directory_that_cannot_be_created_is_refused_as_the_start_refuses_it(self):
        # /proc takes no new directory, even from root, whom access() lets
        # write anywhere.
        environment = {k: v for k, v in os.environ.items() if not k.startswith("BLOOMERY_")}
        result = subprocess.run([harness.BINARY, "--test-config", "--dir", "/proc/forbidden"],
                                cwd=self.dir, env=environment, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, timeout=60)
        output = result.stdout.decode("utf-8", "replace")
        self.assertEqual(result.returncode, 1, output)
        self.assertIn("--dir '/proc/forbidden': cannot be created in '/proc'", output)
        server = harness.Server(data_dir="/proc/forbidden", log_dir=self.dir)
        try:
            server.start(expect_failure=True)
            self.assertNotEqual(server.wait(10), 0)
            self.assertIn("refusing to start: --dir '/proc/forbidden': cannot be created in "
                          "'/proc'", server.log())
        finally:
            server.cleanup()


if __name__ == "__main__":
    unittest.main()
