"""CF.* (Cuckoo filters) as RedisBloom 2.4.23 (in Redis 7.0) answers them;
every reply and error text here was checked against the real module.

CF.RESERVE's defaults (BUCKETSIZE 2, MAXITERATIONS 20, EXPANSION 1; capacity
1024 when CF.ADD / CF.INSERT create a filter), ranges and the order of its
checks; CF.INFO's eight fields (Size: 40 bytes, 16 per sub-filter, one per
slot; buckets: capacity / bucket size up to a power of two; the expansion
rounds up to one too); adds, -1 per item when full, "Filter is full", 32
sub-filters at most; queries (0 for a missing key or another type); CF.DEL,
CF.COMPACT, CF.SCANDUMP / CF.LOADCHUNK; WRONGTYPE, TYPE "MBbloomCF", arity;
RESP3 (2.4 keeps RESP2's shapes, integers and flat arrays; only nulls differ).

Results that depend on where fingerprints land (which insert finds a filter
full, false-positive 0s from CF.INSERTNX, SCANDUMP's chunk iterators) follow
RedisBloom's hashing (MurmurHash64A, seed 0; fingerprint hash % 255 + 1).
Replies are read off a raw socket so that simple strings, bulk strings and
error texts (with or without "ERR ") are compared exactly.
"""

import unittest

from harness import SharedServerTestCase, raw_connection

WRONGTYPE = "WRONGTYPE Operation against a key holding the wrong kind of value"
FULL = "Filter is full"
MAX_EXPANSIONS = "Maximum expansions reached"
BAD_CAPACITY = "Bad capacity"
SMALL_CAPACITY = "Capacity must be at least (BucketSize * 2)"
BUCKETSIZE_RANGE = "BUCKETSIZE: value must be an integer between 1 and 255, inclusive."
MAXITER_RANGE = "MAXITERATIONS: value must be an integer between 1 and 65535, inclusive."
EXPANSION_RANGE = "EXPANSION: value must be an integer between 0 and 32768, inclusive."
INFO_FIELDS = ["Size", "Number of buckets", "Number of filters", "Number of items inserted",
               "Number of items deleted", "Bucket size", "Expansion rate", "Max iterations"]


class Err(str):
    """An error reply's text."""


class Conn:
    """One RESP connection: simple strings come back as str, bulk strings as
    bytes, errors as Err, nulls as None, RESP3 booleans as bool."""

    def __init__(self, port):
        self.sock = raw_connection(port)
        self.reader = self.sock.makefile("rb")

    def send(self, *args):
        parts = [b"*%d\r\n" % len(args)]
        for arg in args:
            arg = arg if isinstance(arg, bytes) else str(arg).encode()
            parts.append(b"$%d\r\n%s\r\n" % (len(arg), arg))
        self.sock.sendall(b"".join(parts))

    def call(self, *args):
        self.send(*args)
        return self.read()[0]

    def raw(self, *args):
        """The reply's bytes exactly as sent."""
        self.send(*args)
        return self.read()[1]

    def read(self):
        """One reply: (value, its bytes)."""
        line = self.reader.readline()
        if not line.endswith(b"\r\n"):
            raise ConnectionError("connection closed mid-reply: %r" % line)
        kind, body = line[:1], line[1:-2]
        simple = {b"+": lambda: body.decode(), b"-": lambda: Err(body.decode()),
                  b":": lambda: int(body), b"_": lambda: None, b"#": lambda: body == b"t"}
        if kind in simple:
            return simple[kind](), line
        if kind == b"$":
            if int(body) < 0:
                return None, line
            data = self.reader.read(int(body) + 2)
            return data[:-2], line + data
        if kind not in (b"*", b"%"):
            raise AssertionError("unexpected reply %r" % line)
        if int(body) < 0:
            return None, line
        items, raw = [], line
        for _ in range(int(body) * (2 if kind == b"%" else 1)):
            value, more = self.read()
            items.append(value)
            raw += more
        return (dict(zip(items[::2], items[1::2])) if kind == b"%" else items), raw


def info_reply(size, buckets, filters=1, inserted=0, deleted=0, bucket_size=2, expansion=1,
               max_iterations=20):
    """CF.INFO's whole reply, fields in RedisBloom's order."""
    values = [size, buckets, filters, inserted, deleted, bucket_size, expansion, max_iterations]
    return [x for pair in zip(INFO_FIELDS, values) for x in pair]


class CfTestCase(SharedServerTestCase):
    def setUp(self):
        self.c = Conn(self.server.port)
        self.addCleanup(self.c.sock.close)
        self.addCleanup(self.c.reader.close)
        self.assertEqual(self.c.call("FLUSHALL"), "OK")

    def call(self, *args):
        return self.c.call(*args)

    def info(self, key):
        reply = self.call("CF.INFO", key)
        return dict(zip(reply[::2], reply[1::2]))

    def assertError(self, text, *args):
        reply = self.call(*args)
        self.assertIsInstance(reply, Err, (args, reply))
        self.assertEqual(reply, text, args)

    def fill_until_error(self, key):
        """CF.ADD item0, item1, ... until an error: (items added, error)."""
        for i in range(1000):
            reply = self.call("CF.ADD", key, "item%d" % i)
            if isinstance(reply, Err):
                return i, reply
            self.assertEqual(reply, 1)
        raise AssertionError("%s never refused an item" % key)


class Reserve(CfTestCase):
    def test_defaults_are_bucket_size_2_twenty_iterations_expansion_1(self):
        self.assertEqual(self.call("CF.RESERVE", "cf", 1000), "OK")
        # 1000 / 2 = 500 buckets, rounded up to 512; 40 + 16 + 512 * 2 bytes.
        # Field names are simple strings (str here), values integers.
        self.assertEqual(self.call("CF.INFO", "cf"), info_reply(1080, 512))

    def test_info_rounds_buckets_and_expansion_up_to_powers_of_two(self):
        cases = [
            (("c1", 4), info_reply(60, 2)),
            (("c2", 100), info_reply(184, 64)),
            (("c3", 1025), info_reply(1080, 512)),
            (("c4", 1027), info_reply(2104, 1024)),
            (("c5", 3, "BUCKETSIZE", 1), info_reply(60, 4, bucket_size=1)),
            (("c6", 1001, "BUCKETSIZE", 3, "MAXITERATIONS", 7, "EXPANSION", 3),
             info_reply(1592, 512, bucket_size=3, expansion=4, max_iterations=7)),
            (("c7", 12, "bucketsize", 6, "expansion", 2, "maxiterations", 1),
             info_reply(68, 2, bucket_size=6, expansion=2, max_iterations=1)),
            (("c8", 100, "EXPANSION", 0, "BUCKETSIZE", 1, "MAXITERATIONS", 65535),
             info_reply(184, 128, bucket_size=1, expansion=0, max_iterations=65535)),
            (("c9", 100, "EXPANSION", 32767), info_reply(184, 64, expansion=32768)),
            (("c10", 510, "EXPANSION", 32768, "BUCKETSIZE", 255),
             info_reply(40 + 16 + 2 * 255, 2, bucket_size=255, expansion=32768)),
            (("big", 10000000), info_reply(40 + 16 + 2 * 8388608, 8388608)),
        ]
        for args, expected in cases:
            self.assertEqual(self.call("CF.RESERVE", *args), "OK", args)
            self.assertEqual(self.call("CF.INFO", args[0]), expected, args)

    def test_capacity_errors(self):
        self.assertError(BAD_CAPACITY, "CF.RESERVE", "k", "abc")
        self.assertError(BAD_CAPACITY, "CF.RESERVE", "k", "1.5")
        self.assertError(BAD_CAPACITY, "CF.RESERVE", "k", "1e3")
        self.assertError(BAD_CAPACITY, "CF.RESERVE", "k", "")
        for capacity in (0, -5, 1, 3):
            self.assertError(SMALL_CAPACITY, "CF.RESERVE", "k", capacity)
        # The minimum is twice the bucket size asked for.
        self.assertError(SMALL_CAPACITY, "CF.RESERVE", "k", 10, "BUCKETSIZE", 6)
        self.assertEqual(self.call("CF.RESERVE", "k", 12, "BUCKETSIZE", 6), "OK")
        self.assertEqual(self.call("EXISTS", "k"), 1)
        self.assertEqual(self.call("CF.RESERVE", "one", 2, "BUCKETSIZE", 1), "OK")

    def test_option_range_and_parse_errors(self):
        cases = [
            (("BUCKETSIZE", 0), BUCKETSIZE_RANGE), (("BUCKETSIZE", 256), BUCKETSIZE_RANGE),
            (("BUCKETSIZE", -1), BUCKETSIZE_RANGE), (("BUCKETSIZE", "x"),
                                                      "Couldn't parse BUCKETSIZE"),
            (("MAXITERATIONS", 0), MAXITER_RANGE), (("MAXITERATIONS", 65536), MAXITER_RANGE),
            (("MAXITERATIONS", "2.0"), "Couldn't parse MAXITERATIONS"),
            (("EXPANSION", -1), EXPANSION_RANGE), (("EXPANSION", 32769), EXPANSION_RANGE),
            (("EXPANSION", "1.0"), "Couldn't parse EXPANSION"),
        ]
        for option, text in cases:
            self.assertError(text, "CF.RESERVE", "k", 100, *option)
        self.assertEqual(self.call("EXISTS", "k"), 0)

    def test_checks_run_capacity_maxiterations_bucketsize_expansion_then_key(self):
        self.assertError(BAD_CAPACITY, "CF.RESERVE", "k", "x", "MAXITERATIONS", 0)
        self.assertError(MAXITER_RANGE, "CF.RESERVE", "k", 100, "BUCKETSIZE", "x",
                         "MAXITERATIONS", 0, "EXPANSION", "y")
        self.assertError(BUCKETSIZE_RANGE, "CF.RESERVE", "k", 100, "MAXITERATIONS", 1,
                         "EXPANSION", 70000, "BUCKETSIZE", 0)
        # The capacity's minimum is checked after every option, so a bad
        # option wins over a capacity too small.
        self.assertError(BUCKETSIZE_RANGE, "CF.RESERVE", "k", 1, "BUCKETSIZE", 0)
        self.assertError(EXPANSION_RANGE, "CF.RESERVE", "k", 1, "BUCKETSIZE", 9,
                         "EXPANSION", 70000)
        # An existing key is looked at last.
        self.assertEqual(self.call("CF.RESERVE", "k", 100), "OK")
        self.assertError("ERR item exists", "CF.RESERVE", "k", 100)
        self.assertError("ERR item exists", "CF.RESERVE", "k", 100, "BUCKETSIZE", 4)
        self.assertError(SMALL_CAPACITY, "CF.RESERVE", "k", 1)
        self.assertError(BAD_CAPACITY, "CF.RESERVE", "k", "x")
        self.assertEqual(self.call("BF.RESERVE", "bf", 0.01, 100), "OK")
        self.assertError(WRONGTYPE, "CF.RESERVE", "bf", 100)
        self.assertError(SMALL_CAPACITY, "CF.RESERVE", "bf", 1)

    def test_unknown_words_are_ignored_and_the_first_of_a_repeated_option_counts(self):
        self.assertEqual(self.call("CF.RESERVE", "k", 100, "FOO", 3), "OK")
        self.assertEqual(self.call("CF.INFO", "k"), info_reply(184, 64))
        self.assertEqual(self.call("CF.RESERVE", "k2", 100, "BUCKETSIZE", 3, "BUCKETSIZE", 0),
                         "OK")
        self.assertEqual(self.info("k2")["Bucket size"], 3)
        self.assertError(BUCKETSIZE_RANGE, "CF.RESERVE", "k3", 100, "BUCKETSIZE", 0,
                         "BUCKETSIZE", 3)


class Add(CfTestCase):
    def test_add_creates_a_default_filter_and_counts_duplicates(self):
        self.assertEqual(self.call("CF.ADD", "k", "x"), 1)
        self.assertEqual(self.call("TYPE", "k"), "MBbloomCF")
        self.assertEqual(self.call("CF.INFO", "k"), info_reply(1080, 512, inserted=1))
        self.assertEqual(self.call("CF.ADD", "k", "x"), 1)
        self.assertEqual(self.call("CF.COUNT", "k", "x"), 2)
        self.assertEqual(self.info("k")["Number of items inserted"], 2)

    def test_addnx_answers_0_for_an_item_present(self):
        self.assertEqual(self.call("CF.ADDNX", "k", "x"), 1)
        self.assertEqual(self.call("CF.ADDNX", "k", "x"), 0)
        self.assertEqual(self.call("CF.ADDNX", "k", "y"), 1)
        self.assertEqual(self.call("CF.ADD", "k", "x"), 1)
        self.assertEqual(self.call("CF.COUNT", "k", "x"), 2)
        self.assertEqual(self.info("k")["Number of items inserted"], 3)

    def test_a_filter_without_expansion_says_full(self):
        # 4 slots: two buckets of two.
        self.assertEqual(self.call("CF.RESERVE", "f", 4, "EXPANSION", 0), "OK")
        self.assertEqual(self.fill_until_error("f"), (4, FULL))
        self.assertError(FULL, "CF.ADD", "f", "item5")
        self.assertError(FULL, "CF.ADDNX", "f", "item9")
        self.assertEqual(self.call("CF.ADDNX", "f", "item0"), 0)  # present: no room needed
        self.assertEqual(self.call("CF.INFO", "f"), info_reply(60, 2, inserted=4, expansion=0))
        self.assertEqual(self.call("CF.MEXISTS", "f", "item0", "item1", "item2", "item3"),
                         [1, 1, 1, 1])

    def test_a_full_filter_grows_by_its_expansion(self):
        self.assertEqual(self.call("CF.RESERVE", "g", 64, "EXPANSION", 2), "OK")
        for i in range(300):
            self.assertEqual(self.call("CF.ADD", "g", "item:%d" % i), 1)
        # 32 + 64 + 128 buckets of 2: 40 + 3 * 16 + 448.
        self.assertEqual(self.call("CF.INFO", "g"),
                         info_reply(536, 32, filters=3, inserted=300, expansion=2))

    def test_adds_stop_at_32_sub_filters_even_with_room_left(self):
        self.assertEqual(self.call("CF.RESERVE", "g", 4), "OK")
        self.assertEqual(self.fill_until_error("g"), (125, MAX_EXPANSIONS))
        self.assertEqual(self.call("CF.INFO", "g"),
                         info_reply(40 + 32 * 16 + 32 * 4, 2, filters=32, inserted=125))
        # Checked before anything is inserted: even present items and
        # CF.INSERT's whole command are refused.
        self.assertError(MAX_EXPANSIONS, "CF.ADDNX", "g", "item0")
        self.assertError(MAX_EXPANSIONS, "CF.INSERT", "g", "ITEMS", "a", "b")
        self.assertEqual(self.call("CF.DEL", "g", "item0"), 1)
        self.assertError(MAX_EXPANSIONS, "CF.ADD", "g", "item0")
        self.assertEqual(self.call("CF.EXISTS", "g", "item1"), 1)


class Insert(CfTestCase):
    def test_insert_answers_per_item_and_creates_with_capacity_1024(self):
        self.assertEqual(self.call("CF.INSERT", "k", "ITEMS", "a", "b", "a"), [1, 1, 1])
        self.assertEqual(self.call("CF.INFO", "k"), info_reply(1080, 512, inserted=3))
        self.assertEqual(self.call("CF.INSERTNX", "k", "ITEMS", "a", "c", "c"), [0, 1, 0])
        self.assertEqual(self.call("CF.COUNT", "k", "a"), 2)
        self.assertEqual(self.info("k")["Number of items inserted"], 4)

    def test_capacity_sizes_a_new_filter_and_is_ignored_for_an_existing_one(self):
        self.assertEqual(self.call("CF.INSERT", "k", "CAPACITY", 100, "ITEMS", "a"), [1])
        self.assertEqual(self.call("CF.INFO", "k"), info_reply(184, 64, inserted=1))
        self.assertEqual(self.call("CF.INSERTNX", "n", "CAPACITY", 10, "ITEMS", "a", "b"), [1, 1])
        self.assertEqual(self.call("CF.INFO", "n"), info_reply(72, 8, inserted=2))
        self.assertEqual(self.call("CF.INSERT", "k", "CAPACITY", 100000, "ITEMS", "b"), [1])
        self.assertEqual(self.call("CF.INFO", "k"), info_reply(184, 64, inserted=2))
        # The last CAPACITY counts; 4 (2 * the default bucket size) is the least.
        self.assertEqual(self.call("CF.INSERT", "m", "CAPACITY", 4, "CAPACITY", 1000,
                                   "ITEMS", "a"), [1])
        self.assertEqual(self.info("m")["Number of buckets"], 512)
        self.assertEqual(self.call("CF.INSERT", "m4", "CAPACITY", 4, "ITEMS", "a"), [1])
        self.assertEqual(self.call("CF.INFO", "m4"), info_reply(60, 2, inserted=1))

    def test_capacity_errors(self):
        self.assertError(BAD_CAPACITY, "CF.INSERT", "k", "CAPACITY", "x", "ITEMS", "a")
        self.assertError(BAD_CAPACITY, "CF.INSERT", "k", "CAPACITY", "x", "FOO")
        for capacity in (3, 0, -1):
            self.assertError(SMALL_CAPACITY, "CF.INSERT", "k", "CAPACITY", capacity, "ITEMS", "a")
        self.assertEqual(self.call("EXISTS", "k"), 0)
        # Checked while parsing, even for a filter that exists.
        self.assertEqual(self.call("CF.ADD", "k", "a"), 1)
        self.assertError(SMALL_CAPACITY, "CF.INSERT", "k", "CAPACITY", 1, "ITEMS", "b")

    def test_nocreate_on_a_missing_key_is_not_found(self):
        self.assertError("ERR not found", "CF.INSERT", "k", "NOCREATE", "ITEMS", "a")
        self.assertError("ERR not found", "CF.INSERTNX", "k", "NOCREATE", "ITEMS", "a")
        self.assertError("ERR not found", "CF.INSERT", "k", "CAPACITY", 4, "NOCREATE",
                         "ITEMS", "a")
        self.assertEqual(self.call("EXISTS", "k"), 0)
        self.assertEqual(self.call("CF.ADD", "k", "a"), 1)
        self.assertEqual(self.call("CF.INSERT", "k", "NOCREATE", "ITEMS", "b"), [1])

    def test_options_are_known_by_their_first_letter(self):
        self.assertEqual(self.call("CF.INSERT", "k", "cap", 100, "items", "a"), [1])
        self.assertEqual(self.info("k")["Number of buckets"], 64)
        self.assertError("ERR not found", "CF.INSERT", "n", "n", "ITEMS", "a")
        self.assertError("Unknown argument received", "CF.INSERT", "k", "FOO", "ITEMS", "a")
        self.assertError("Unknown argument received", "CF.INSERT", "k", "xyz", 3, "ITEMS", "a")
        self.assertError("Unknown argument received", "CF.INSERT", "k", "NOCREATE", "FOO")
        self.assertError("Unknown argument received", "CF.INSERT", "k", "FOO", "CAPACITY", "x",
                         "ITEMS", "a")
        # Everything after ITEMS is an item, ITEMS included.
        self.assertEqual(self.call("CF.INSERT", "i", "ITEMS", "ITEMS"), [1])
        self.assertEqual(self.call("CF.EXISTS", "i", "ITEMS"), 1)

    def test_items_are_required(self):
        arity = "ERR wrong number of arguments for 'cf.insert' command"
        for args in (("k",), ("k", "ITEMS"), ("k", "a"), ("k", "CAPACITY", 100, "ITEMS"),
                     ("k", "NOCREATE", "CAPACITY"), ("k", "NOCREATE", "NOCREATE"),
                     ("k", "CAPACITY")):
            self.assertError(arity, "CF.INSERT", *args)
        self.assertError("ERR wrong number of arguments for 'cf.insertnx' command",
                         "CF.INSERTNX", "k", "ITEMS")
        self.assertEqual(self.call("EXISTS", "k"), 0)

    def test_a_full_filter_answers_minus_1_per_item(self):
        self.assertEqual(self.call("CF.RESERVE", "f", 4, "EXPANSION", 0), "OK")
        items = ["item%d" % i for i in range(10)]
        self.assertEqual(self.call("CF.INSERT", "f", "ITEMS", *items),
                         [1, 1, 1, 1, -1, -1, -1, -1, -1, -1])
        # item6's fingerprint is in one of its buckets already: INSERTNX
        # takes it for present.
        self.assertEqual(self.call("CF.INSERTNX", "f", "ITEMS", *items),
                         [0, 0, 0, 0, -1, -1, 0, -1, -1, -1])
        self.assertEqual(self.call("CF.INFO", "f"), info_reply(60, 2, inserted=4, expansion=0))


class Queries(CfTestCase):
    def test_exists_mexists_count_on_a_filter(self):
        self.assertEqual(self.call("CF.INSERT", "k", "ITEMS", "a", "a", "a", "b"), [1, 1, 1, 1])
        self.assertEqual(self.call("CF.EXISTS", "k", "a"), 1)
        self.assertEqual(self.call("CF.EXISTS", "k", "z"), 0)
        self.assertEqual(self.call("CF.MEXISTS", "k", "a", "b", "z"), [1, 1, 0])
        self.assertEqual(self.call("CF.COUNT", "k", "a"), 3)
        self.assertEqual(self.call("CF.COUNT", "k", "b"), 1)
        self.assertEqual(self.call("CF.COUNT", "k", "z"), 0)

    def test_missing_keys_and_other_types(self):
        """Queries answer 0; CF.DEL and CF.COMPACT say not found, CF.INFO
        "ERR not found" or WRONGTYPE."""
        self.assertEqual(self.call("BF.ADD", "bf", "a"), 1)
        for key in ("missing", "bf"):
            self.assertEqual(self.call("CF.EXISTS", key, "a"), 0)
            self.assertEqual(self.call("CF.MEXISTS", key, "a", "b"), [0, 0])
            self.assertEqual(self.call("CF.COUNT", key, "a"), 0)
            self.assertError("Not found", "CF.DEL", key, "a")
            self.assertError("Cuckoo filter was not found", "CF.COMPACT", key)
        self.assertError("ERR not found", "CF.INFO", "missing")
        self.assertError(WRONGTYPE, "CF.INFO", "bf")
        self.assertEqual(self.call("EXISTS", "missing"), 0)

    def test_del_removes_one_copy_at_a_time(self):
        self.assertEqual(self.call("CF.ADD", "k", "x"), 1)
        self.assertEqual(self.call("CF.ADD", "k", "x"), 1)
        self.assertEqual(self.call("CF.ADD", "k", "y"), 1)
        self.assertEqual(self.call("CF.DEL", "k", "x"), 1)
        self.assertEqual(self.call("CF.COUNT", "k", "x"), 1)
        self.assertEqual(self.call("CF.EXISTS", "k", "x"), 1)
        self.assertEqual(self.call("CF.DEL", "k", "x"), 1)
        self.assertEqual(self.call("CF.EXISTS", "k", "x"), 0)
        self.assertEqual(self.call("CF.DEL", "k", "x"), 0)
        self.assertEqual(self.call("CF.INFO", "k"), info_reply(1080, 512, inserted=1, deleted=2))
        self.assertEqual(self.call("CF.EXISTS", "k", "y"), 1)

    def test_compact_answers_ok_and_resets_the_deleted_count(self):
        self.assertEqual(self.call("CF.INSERT", "k", "ITEMS", "a", "b", "c"), [1, 1, 1])
        self.assertEqual(self.call("CF.DEL", "k", "a"), 1)
        self.assertEqual(self.info("k")["Number of items deleted"], 1)
        self.assertEqual(self.call("CF.COMPACT", "k"), "OK")
        self.assertEqual(self.call("CF.INFO", "k"), info_reply(1080, 512, inserted=2))
        self.assertEqual(self.call("CF.MEXISTS", "k", "a", "b", "c"), [0, 1, 1])

    def test_deletes_from_a_grown_filter_compact_it_past_a_tenth(self):
        self.assertEqual(self.call("CF.RESERVE", "g", 64, "EXPANSION", 2), "OK")
        for i in range(300):
            self.call("CF.ADD", "g", "item:%d" % i)
        deleted = [self.call("CF.DEL", "g", "item:%d" % i) for i in range(40)]
        self.assertEqual(deleted, [1] * 40)
        # The 28th delete made deletes exceed 10% of the items: compacted,
        # the count restarted; 12 more since.
        self.assertEqual(self.call("CF.INFO", "g"),
                         info_reply(536, 32, filters=3, inserted=260, deleted=12, expansion=2))
        self.assertEqual(self.call("CF.COMPACT", "g"), "OK")
        self.assertEqual(self.info("g")["Number of items deleted"], 0)
        items = ["item:%d" % i for i in range(40, 300)]
        self.assertEqual(self.call("CF.MEXISTS", "g", *items), [1] * len(items))


def scandump(test, key):
    """Every CF.SCANDUMP chunk of `key`, header first, as [(iterator, bytes)]."""
    chunks, cursor = [], 0
    for _ in range(1000):
        reply = test.call("CF.SCANDUMP", key, cursor)
        test.assertIsInstance(reply, list, reply)
        cursor, data = reply
        if cursor == 0:
            test.assertIsNone(data)
            return chunks
        chunks.append((cursor, data))
    raise AssertionError("CF.SCANDUMP did not finish")


class Dump(CfTestCase):
    def test_scandump_and_loadchunk_copy_a_filter_exactly(self):
        self.assertEqual(self.call("CF.RESERVE", "src", 64, "EXPANSION", 2), "OK")
        items = ["item:%d" % i for i in range(300)]
        self.assertEqual(self.call("CF.INSERT", "src", "ITEMS", *items), [1] * 300)
        chunks = scandump(self, "src")
        # The header, then one chunk per sub-filter; each iterator is the
        # position after its chunk.
        self.assertEqual([(it, len(data)) for it, data in chunks],
                         [(1, 38), (65, 64), (193, 128), (449, 256)])
        for iterator, data in chunks:
            self.assertEqual(self.call("CF.LOADCHUNK", "copy", iterator, data), "OK")
        self.assertEqual(self.call("TYPE", "copy"), "MBbloomCF")
        self.assertEqual(scandump(self, "copy"), chunks)
        self.assertEqual(self.call("CF.INFO", "copy"), self.call("CF.INFO", "src"))
        self.assertEqual(self.call("CF.MEXISTS", "copy", *items), [1] * 300)
        self.assertEqual(self.call("CF.ADD", "copy", "new"), 1)

    def test_the_header_is_38_bytes_little_endian(self):
        self.assertEqual(self.call("CF.RESERVE", "k", 1000), "OK")
        self.assertEqual(self.call("CF.ADD", "k", "a"), 1)
        header = (b"\x01" + b"\0" * 7 + b"\x00\x02" + b"\0" * 6 + b"\0" * 8 +
                  b"\x01" + b"\0" * 7 + b"\x02\x00\x14\x00\x01\x00")
        self.assertEqual(self.c.raw("CF.SCANDUMP", "k", 0),
                         b"*2\r\n:1\r\n$38\r\n" + header + b"\r\n")
        reply = self.call("CF.SCANDUMP", "k", 1)
        self.assertEqual(reply[0], 1025)
        self.assertEqual(len(reply[1]), 1024)
        self.assertEqual(self.call("CF.SCANDUMP", "k", 1025), [0, None])
        self.assertEqual(self.call("CF.SCANDUMP", "k", 5000), [0, None])

    def test_an_empty_filter_dumps_nothing(self):
        self.assertEqual(self.call("CF.RESERVE", "k", 100), "OK")
        self.assertEqual(self.call("CF.SCANDUMP", "k", 0), [0, None])
        self.assertEqual(self.call("CF.ADD", "k", "a"), 1)
        self.assertEqual(self.call("CF.DEL", "k", "a"), 1)
        self.assertEqual(self.call("CF.SCANDUMP", "k", 0), [0, None])

    def test_a_header_alone_makes_an_empty_filter_with_its_counts(self):
        self.assertEqual(self.call("CF.INSERT", "src", "ITEMS", "a", "b"), [1, 1])
        header = self.call("CF.SCANDUMP", "src", 0)[1]
        self.assertEqual(self.call("CF.LOADCHUNK", "h", 1, header), "OK")
        self.assertEqual(self.call("CF.INFO", "h"), info_reply(1080, 512, inserted=2))
        self.assertEqual(self.call("CF.EXISTS", "h", "a"), 0)

    def test_scandump_errors(self):
        self.assertEqual(self.call("BF.ADD", "bf", "a"), 1)
        self.assertEqual(self.call("CF.ADD", "k", "a"), 1)
        self.assertError("ERR not found", "CF.SCANDUMP", "missing", 0)
        self.assertError(WRONGTYPE, "CF.SCANDUMP", "bf", 0)
        self.assertError("Invalid position", "CF.SCANDUMP", "k", -1)
        self.assertError("Invalid position", "CF.SCANDUMP", "k", "x")
        self.assertError("Invalid position", "CF.SCANDUMP", "missing", -1)  # checked first

    def test_loadchunk_errors(self):
        self.assertEqual(self.call("BF.ADD", "bf", "a"), 1)
        self.assertEqual(self.call("CF.ADD", "k", "a"), 1)
        self.assertError("Invalid position", "CF.LOADCHUNK", "new", 0, "x")
        self.assertError("Invalid position", "CF.LOADCHUNK", "new", "x", "x")
        self.assertError("Invalid position", "CF.LOADCHUNK", "bf", 0, "x")  # before the key
        self.assertError("Invalid header", "CF.LOADCHUNK", "new", 1, "short")
        self.assertError("Invalid header", "CF.LOADCHUNK", "new", 1, b"\0" * 39)
        self.assertError("Couldn't create filter!", "CF.LOADCHUNK", "new", 1, b"\0" * 38)
        self.assertError("ERR item exists", "CF.LOADCHUNK", "k", 1, "abc")
        self.assertError(WRONGTYPE, "CF.LOADCHUNK", "bf", 1, "abc")
        self.assertError("ERR not found", "CF.LOADCHUNK", "new", 2, "abc")
        self.assertError(WRONGTYPE, "CF.LOADCHUNK", "bf", 2, "abc")
        self.assertEqual(self.call("EXISTS", "new"), 0)
        # A chunk ends at its iterator - 1: it must fit after the header's
        # position 1 and inside the filter's 1024 bytes.
        for iterator, data in ((-1, "abc"), (2, "abc"), (3, "abc"), (4, ""), (1026, "abc")):
            self.assertError("Couldn't load chunk!", "CF.LOADCHUNK", "k", iterator, data)
        self.assertEqual(self.call("CF.LOADCHUNK", "k", 4, "abc"), "OK")
        self.assertEqual(self.call("CF.LOADCHUNK", "k", 1025, "abc"), "OK")


class Types(CfTestCase):
    def test_bf_commands_on_a_cf_key(self):
        self.assertEqual(self.call("CF.ADD", "c", "a"), 1)
        for args in (("BF.ADD", "c", "a"), ("BF.MADD", "c", "a"), ("BF.INFO", "c"),
                     ("BF.RESERVE", "c", 0.01, 100), ("BF.INSERT", "c", "ITEMS", "a"),
                     ("BF.CARD", "c"), ("BF.SCANDUMP", "c", 0)):
            self.assertError(WRONGTYPE, *args)
        # RedisBloom's BF.EXISTS / BF.MEXISTS answer 0 for another type.
        self.assertEqual(self.call("BF.EXISTS", "c", "a"), 0)
        self.assertEqual(self.call("BF.MEXISTS", "c", "a"), [0])
        self.assertEqual(self.call("CF.EXISTS", "c", "a"), 1)

    def test_cf_commands_on_a_bf_key(self):
        self.assertEqual(self.call("BF.ADD", "bf", "a"), 1)
        self.assertEqual(self.call("TYPE", "bf"), "MBbloom--")
        for args in (("CF.ADD", "bf", "a"), ("CF.ADDNX", "bf", "a"), ("CF.INFO", "bf"),
                     ("CF.RESERVE", "bf", 100), ("CF.INSERT", "bf", "ITEMS", "a"),
                     ("CF.INSERTNX", "bf", "ITEMS", "a"), ("CF.SCANDUMP", "bf", 0),
                     ("CF.INSERT", "bf", "NOCREATE", "ITEMS", "a"),
                     ("CF.LOADCHUNK", "bf", 1, "x"), ("CF.LOADCHUNK", "bf", 2, "x")):
            self.assertError(WRONGTYPE, *args)
        # CF.EXISTS / CF.MEXISTS / CF.COUNT answer 0 and CF.DEL / CF.COMPACT
        # "not found" instead: test_missing_keys_and_other_types.
        self.assertEqual(self.call("BF.EXISTS", "bf", "a"), 1)
        self.assertEqual(self.call("BF.INFO", "bf")[6:8], ["Number of items inserted", 1])

    def test_generic_commands_on_a_cf_key(self):
        self.assertEqual(self.call("CF.ADD", "c", "a"), 1)
        self.assertEqual(self.call("TYPE", "c"), "MBbloomCF")
        self.assertEqual(self.call("RENAME", "c", "c2"), "OK")
        self.assertEqual(self.call("EXISTS", "c"), 0)
        self.assertEqual(self.call("TYPE", "c2"), "MBbloomCF")
        self.assertEqual(self.call("CF.EXISTS", "c2", "a"), 1)
        self.assertEqual(self.call("EXPIRE", "c2", 100), 1)
        ttl = self.call("TTL", "c2")
        self.assertTrue(0 < ttl <= 100, ttl)
        self.assertEqual(self.call("PERSIST", "c2"), 1)
        self.assertEqual(self.call("TTL", "c2"), -1)
        self.assertEqual(self.call("DEL", "c2"), 1)
        self.assertEqual(self.call("EXISTS", "c2"), 0)
        self.assertEqual(self.call("TYPE", "c2"), "none")


class Arity(CfTestCase):
    CASES = [
        ("CF.ADD", ("k",)), ("CF.ADD", ("k", "a", "b")), ("CF.ADDNX", ("k",)),
        ("CF.ADDNX", ("k", "a", "b")), ("CF.INSERT", ("k", "ITEMS")), ("CF.INSERTNX", ("k",)),
        ("CF.EXISTS", ("k",)), ("CF.EXISTS", ("k", "a", "b")), ("CF.MEXISTS", ("k",)),
        ("CF.MEXISTS", ()), ("CF.COUNT", ("k",)), ("CF.COUNT", ("k", "a", "b")),
        ("CF.DEL", ("k",)), ("CF.DEL", ("k", "a", "b")), ("CF.COMPACT", ()),
        ("CF.COMPACT", ("k", "x")), ("CF.INFO", ()), ("CF.INFO", ("k", "x")),
        ("CF.SCANDUMP", ("k",)), ("CF.SCANDUMP", ("k", 0, 0)), ("CF.LOADCHUNK", ("k", 1)),
        ("CF.LOADCHUNK", ("k", 1, "x", "y")), ("CF.RESERVE", ()), ("CF.RESERVE", ("k",)),
        ("CF.RESERVE", ("k", 100, "BUCKETSIZE")), ("CF.RESERVE", ("k", 100, "EXPANSION", 1, "X")),
    ]

    def test_wrong_argument_counts_name_the_command_in_lower_case(self):
        for command, args in self.CASES:
            text = "ERR wrong number of arguments for '%s' command" % command.lower()
            self.assertError(text, command, *args)
            self.assertError(text, command.lower(), *args)
            self.assertError(text, command.title(), *args)
        self.assertEqual(self.call("DBSIZE"), 0)


class RespThree(CfTestCase):
    """RESP3 clients get the shapes the BF.* family gives them (RedisBloom
    2.8's and Redis 8's): booleans for yes/no answers (CF.INSERT's per item
    too), CF.INFO a map; counts and CF.INSERTNX's 1 / 0 / -1 stay integers. (RedisBloom 2.4
    answered RESP3 with RESP2's shapes.)"""

    def setUp(self):
        super().setUp()
        hello = self.call("HELLO", 3)
        self.assertIsInstance(hello, dict, hello)
        self.assertEqual(hello[b"proto"], 3)

    def test_replies_take_resp3_shapes(self):
        raw = self.c.raw
        self.assertEqual(raw("CF.ADD", "k", "a"), b"#t\r\n")
        self.assertEqual(raw("CF.ADDNX", "k", "a"), b"#f\r\n")
        self.assertEqual(raw("CF.EXISTS", "k", "a"), b"#t\r\n")
        self.assertEqual(raw("CF.EXISTS", "k", "b"), b"#f\r\n")
        self.assertEqual(raw("CF.EXISTS", "missing", "b"), b"#f\r\n")
        self.assertEqual(raw("CF.MEXISTS", "k", "a", "b"), b"*2\r\n#t\r\n#f\r\n")
        self.assertEqual(raw("CF.COUNT", "k", "a"), b":1\r\n")
        self.assertEqual(raw("CF.INSERT", "k", "ITEMS", "a", "c"), b"*2\r\n#t\r\n#t\r\n")
        self.assertEqual(raw("CF.INSERTNX", "k", "ITEMS", "a", "d"), b"*2\r\n:0\r\n:1\r\n")
        self.assertEqual(raw("CF.DEL", "k", "a"), b"#t\r\n")
        self.assertEqual(raw("CF.COMPACT", "k"), b"+OK\r\n")
        self.assertEqual(raw("CF.INFO", "k"),
                         b"%8\r\n+Size\r\n:1080\r\n+Number of buckets\r\n:512\r\n"
                         b"+Number of filters\r\n:1\r\n+Number of items inserted\r\n:3\r\n"
                         b"+Number of items deleted\r\n:0\r\n+Bucket size\r\n:2\r\n"
                         b"+Expansion rate\r\n:1\r\n+Max iterations\r\n:20\r\n")
        self.assertEqual(raw("TYPE", "k"), b"+MBbloomCF\r\n")
        self.assertEqual(raw("CF.INFO", "missing"), b"-ERR not found\r\n")

    def test_an_empty_dump_ends_with_a_resp3_null(self):
        self.assertEqual(self.call("CF.RESERVE", "k", 100), "OK")
        self.assertEqual(self.c.raw("CF.SCANDUMP", "k", 0), b"*2\r\n:0\r\n_\r\n")
        self.assertEqual(self.call("CF.ADD", "k", "a"), 1)
        self.assertEqual(self.c.raw("CF.SCANDUMP", "k", 129), b"*2\r\n:0\r\n_\r\n")


if __name__ == "__main__":
    unittest.main()
