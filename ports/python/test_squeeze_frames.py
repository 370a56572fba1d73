"""Tests of squeeze_frames against the Go build's golden frames, the
examples of docs/FORMAT.md, a corpus of corrupt frames, and random values.

Run: python3 -m unittest -v test_squeeze_frames (in ports/python)."""

import glob
import os
import random
import re
import struct
import unittest
import zlib

import squeeze_frames as sf

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
GOLDEN = os.path.join(ROOT, "codec", "testdata", "frames", "v1")


def read(*path):
    with open(os.path.join(*path), "rb") as f:
        return f.read()


def golden_frames():
    """(name, frame) of every golden frame; each holds input.txt."""
    return [(os.path.basename(p), read(p)) for p in sorted(glob.glob(os.path.join(GOLDEN, "*.bin")))]


def one_per_codec():
    seen = {}
    for name, frame in golden_frames():
        codec = sf.parse_header(frame).codec
        if codec in sf.PORTABLE and codec not in seen:
            seen[codec] = frame
    return seen


def reframe(frame, original_len=None, flags=None, codec_id=None, version=None, checksum=None):
    """Rewrites fields of a frame's header, keeping its payload."""
    h = sf.parse_header(frame)
    out = bytearray(sf.MAGIC)
    out += bytes((h.version if version is None else version, h.codec_id if codec_id is None else codec_id,
                  h.flags if flags is None else flags))
    sf._append_uvarint(out, h.original_len if original_len is None else original_len)
    if h.dict_id is not None:
        sf._append_uvarint(out, h.dict_id)
    if h.checksum is not None:
        out += struct.pack("<I", h.checksum if checksum is None else checksum)
    return bytes(out) + frame[h.length:]


def frame_of(codec_id, original_len, payload, checksum=None):
    return bytes(sf._header_bytes(codec_id, original_len, checksum)) + payload


class Golden(unittest.TestCase):
    def test_every_portable_golden_frame_decodes(self):
        want = read(GOLDEN, "input.txt")
        seen = set()
        for name, frame in golden_frames():
            codec = sf.parse_header(frame).codec
            with self.subTest(frame=name):
                if codec in sf.PORTABLE:
                    self.assertEqual(sf.decode(frame), want)
                    seen.add(codec)
                elif codec in sf.GO_ONLY:
                    self.assertRaises(sf.GoOnlyCodec, sf.decode, frame)
                else:
                    self.assertRaises(sf.NotPortable, sf.decode, frame)
        self.assertEqual(seen, set(sf.PORTABLE), "a portable codec has no golden frame")

    def test_golden_dictionary_frame(self):
        d = os.path.join(GOLDEN, "dict")
        frame, want, data = read(d, "zstd-dict-40001.bin"), read(d, "input.json"), read(d, "40001.zdict")
        self.assertEqual(sf.decode(frame, dictionary=lambda i: data if i == 40001 else None), want)
        self.assertEqual(sf.decode(frame, dictionary={40001: data}), want)
        self.assertRaises(sf.UnknownDictionary, sf.decode, frame)
        self.assertRaises(sf.UnknownDictionary, sf.decode, frame, dictionary={})
        other = data[:4] + struct.pack("<I", 40002) + data[8:]
        self.assertRaises(sf.UnknownDictionary, sf.decode, frame, dictionary={40001: other})

    def test_format_doc_examples(self):
        doc = read(ROOT, "docs", "FORMAT.md").decode()
        examples = re.findall(r'(?m)^frame: +([0-9a-f ]+)\nvalue: +"(.*)"$', doc)
        self.assertGreaterEqual(len(examples), 4)
        for hexframe, value in examples:
            frame = bytes.fromhex(hexframe)
            with self.subTest(frame=hexframe):
                if sf.parse_header(frame).codec in sf.GO_ONLY:
                    self.assertRaises(sf.GoOnlyCodec, sf.decode, frame)
                else:
                    self.assertEqual(sf.decode(frame), value.encode())

    def test_crc32c_check_value(self):
        self.assertEqual(sf.crc32c(b"123456789"), 0xE3069283)
        self.assertEqual(sf._crc32c_py(b"123456789"), 0xE3069283)


class Raw(unittest.TestCase):
    def test_values_that_are_not_frames_come_back_as_they_are(self):
        for v in [b"", b"{\"a\":1}", b"\xc1", b"\xc1S", b"\xc1SR....", bytearray(b"abc"), b"x" * 1000]:
            self.assertEqual(sf.decode(v), bytes(v))

    def test_str_is_refused(self):
        self.assertRaises(TypeError, sf.decode, "text")
        self.assertRaises(TypeError, sf.encode, "text")


class Corrupt(unittest.TestCase):
    """A corrupt frame raises one of the module's errors, never another
    exception and never wrong data."""

    def test_every_truncation(self):
        for codec, frame in one_per_codec().items():
            for n in range(3, len(frame)):
                with self.subTest(codec=codec, length=n):
                    self.assertRaises(sf.CorruptFrame, sf.decode, frame[:n])

    def test_every_bit_flip(self):
        want = read(GOLDEN, "input.txt")
        for codec, frame in one_per_codec().items():
            for i in range(3, len(frame)):
                for bit in range(8):
                    bad = bytearray(frame)
                    bad[i] ^= 1 << bit
                    with self.subTest(codec=codec, byte=i, bit=bit):
                        try:
                            got = sf.decode(bytes(bad))
                        except sf.FrameError:
                            continue
                        # Some bits carry no data (gzip's mtime, a header's
                        # OS byte): the value must then be the right one.
                        self.assertEqual(got, want)

    def test_wrong_checksum(self):
        for codec, frame in one_per_codec().items():
            h = sf.parse_header(frame)
            with self.subTest(codec=codec):
                self.assertRaises(sf.ChecksumMismatch, sf.decode, reframe(frame, checksum=h.checksum ^ 1))

    def test_oversized_length(self):
        for codec, frame in one_per_codec().items():
            with self.subTest(codec=codec):
                self.assertRaises(sf.TooLarge, sf.decode, reframe(frame, original_len=1 << 40))
                self.assertRaises(sf.TooLarge, sf.decode, reframe(frame, original_len=sf.DEFAULT_MAX_SIZE + 1))
                self.assertRaises(sf.TooLarge, sf.decode, frame, max_size=1000)
                self.assertRaises(sf.CorruptFrame, sf.decode, reframe(frame, original_len=1127))
                self.assertRaises(sf.CorruptFrame, sf.decode, reframe(frame, original_len=1129))

    def test_bytes_after_the_stream(self):
        for codec, frame in one_per_codec().items():
            h = sf.parse_header(frame)
            for extra in (b"\0", b"\0\0\0\0", frame[h.length:]):
                with self.subTest(codec=codec, extra=len(extra)):
                    self.assertRaises(sf.CorruptFrame, sf.decode, frame + extra)

    def test_header_errors(self):
        frame = one_per_codec()["zstd"]
        self.assertRaises(sf.UnsupportedVersion, sf.decode, reframe(frame, version=2))
        self.assertRaises(sf.UnknownCodec, sf.decode, reframe(frame, codec_id=0x0B))
        self.assertRaises(sf.CorruptFrame, sf.decode, reframe(frame, flags=0x05))
        self.assertRaises(sf.UnknownDictionary, sf.decode, b"\xc1SQ\x01\x02\x02\x05\x07abcde")
        overflow = b"\xc1SQ\x01\x00\x00" + b"\xff" * 10 + b"\x01"
        self.assertRaises(sf.CorruptFrame, sf.decode, overflow)
        self.assertRaises(sf.CorruptFrame, sf.decode, b"\xc1SQ\x01\x00\x00" + b"\xff" * 9 + b"\x02")
        self.assertRaises(sf.TruncatedFrame, sf.decode, b"\xc1SQ\x01\x00\x00\x80")
        self.assertRaises(sf.TruncatedFrame, sf.decode, b"\xc1SQ\x01\x00")
        self.assertRaises(sf.TruncatedFrame, sf.decode, b"\xc1SQ\x01\x00\x00\x05hell")
        self.assertRaises(sf.CorruptFrame, sf.decode, b"\xc1SQ\x01\x00\x00\x05hello!")

    def test_bombs_are_refused_without_decoding_them(self):
        import brotli
        import lz4.block
        import snappy
        zeros = bytes(64 << 20)
        cases = {
            "gzip": (0x06, zlib.compressobj(9, zlib.DEFLATED, 31)),
            "deflate": (0x07, zlib.compressobj(9, zlib.DEFLATED, -15)),
            "zlib": (0x08, zlib.compressobj(9, zlib.DEFLATED, 15)),
        }
        for codec, (cid, c) in cases.items():
            with self.subTest(codec=codec):
                self.assertRaises(sf.CorruptFrame, sf.decode, frame_of(cid, 1000, c.compress(zeros) + c.flush()))
        self.assertRaises(sf.CorruptFrame, sf.decode, frame_of(0x05, 1000, brotli.compress(zeros)))
        payload = lz4.block.compress(zeros[:1 << 20], store_size=False)
        self.assertRaises(sf.CorruptFrame, sf.decode, frame_of(0x02, 1000, payload))
        self.assertRaises(sf.CorruptFrame, sf.decode, frame_of(0x02, 1 << 20, b"\x00" * 10))
        self.assertRaises(sf.CorruptFrame, sf.decode, frame_of(0x04, 1000, snappy.compress(zeros[:1 << 20])))
        # zstd: 4000 RLE blocks of 128 KiB (500 MiB) in 16 kB, with and
        # without a content size in the zstd frame header.
        blocks = b"".join(struct.pack("<I", (131072 << 3) | 2 | (i == 3999))[:3] + b"A" for i in range(4000))
        for fh in (b"\x00\x38", b"\x40\x38\x00\x00"):
            self.assertRaises(sf.CorruptFrame, sf.decode, frame_of(0x01, 1000, b"\x28\xb5\x2f\xfd" + fh + blocks))


class WritePolicy(unittest.TestCase):
    def test_short_numeric_and_hyperloglog_values_are_stored_raw(self):
        for v in [b"short", b"1" * 100, b"  -12345678901234567890123456789012345678901234567890123456789012345.5e10",
                  b"HYLL" + b"\x01" * 200]:
            self.assertEqual(sf.encode(v, "zstd"), v)

    def test_magic_prefixed_values_are_wrapped(self):
        v = b"\xc1SQ\x01 not a frame"
        stored = sf.encode(v, "zstd")
        self.assertEqual(sf.parse_header(stored).codec, "none")
        self.assertEqual(sf.decode(stored), v)

    def test_incompressible_values_are_stored_raw(self):
        v = random.Random(1).randbytes(4096)
        self.assertEqual(sf.encode(v, "zstd"), v)

    def test_go_only_and_unknown_codecs(self):
        self.assertRaises(sf.GoOnlyCodec, sf.encode, b"x" * 100, "s2")
        self.assertRaises(sf.GoOnlyCodec, sf.encode, b"x" * 100, "minlz")
        self.assertRaises(sf.NotPortable, sf.encode, b"x" * 100, "xz")
        self.assertRaises(sf.UnknownCodec, sf.encode, b"x" * 100, "lzma")
        self.assertRaises(ValueError, sf.encode, b"x" * 100, "gzip", 12)

    def test_reads_as_number(self):
        yes = [b"0", b" 12", b"-.5e3", b"+1.", b"0x1p4", b"0X.8P-2", b"0xff", b"NaN", b"inf", b"-Infinity",
               b"nan(0x1_a)", b"nan()", b"\t\n 7"]
        no = [b"", b" ", b"12 ", b"1e", b"1e+", b".", b"0x", b"0xg", b"0x1e+5", b"1.2.3", b"nan(", b"nan(-)",
              b"infinit", b"--1", b"1_000", b"0x1p"]
        for v in yes:
            self.assertTrue(sf.reads_as_number(v), v)
        for v in no:
            self.assertFalse(sf.reads_as_number(v), v)

    def test_dictionary(self):
        import zstandard
        rng = random.Random(7)
        docs = [b'{"id":%d,"user":"%s","langs":["go","ruby"],"bio":"writes compilers; likes caches","score":%d}'
                % (i, rng.choice([b"ada", b"grace", b"linus"]), rng.randrange(1000)) for i in range(500)]
        data = zstandard.train_dictionary(2048, docs, dict_id=40077).as_bytes()
        value = docs[3]
        stored = sf.encode(value, "zstd", 3, dictionary=data, min_size=0)
        self.assertEqual(sf.parse_header(stored).dict_id, 40077)
        self.assertLess(len(stored), len(sf.encode(value, "zstd", 3, min_size=0, min_gain=-1)))
        self.assertEqual(sf.decode(stored, dictionary={40077: data}), value)
        self.assertRaises(ValueError, sf.encode, value, "gzip", dictionary=data)

    def test_squeeze_trained_dictionary(self):
        # Decodes everywhere; libzstd before 1.5.7 will not compress with it.
        import zstandard
        d = os.path.join(GOLDEN, "dict")
        data, value = read(d, "40001.zdict"), read(d, "input.json")
        try:
            stored = sf.encode(value, "zstd", dictionary=data)
        except ValueError as e:
            self.assertLess(zstandard.ZSTD_VERSION, (1, 5, 7))
            self.assertIn("cannot compress with dictionary 40001", str(e))
            return
        self.assertEqual(sf.decode(stored, dictionary={40001: data}), value)


class Property(unittest.TestCase):
    """Random values of random shapes round trip through every portable
    codec, under the write policy and as forced frames."""

    def values(self, rng, count):
        words = [b"redis", b"squeeze", b"{\"id\":", b"\"name\":\"ada\"", b"},", b"\n", b" ", b"\xc1SQ"]
        for _ in range(count):
            kind = rng.randrange(4)
            n = rng.choice([0, 1, 7, 63, 64, 65, 300, 4096, 70000])
            if kind == 0:
                yield rng.randbytes(n)
            elif kind == 1:
                yield b"".join(rng.choice(words) for _ in range(n // 4 + 1))[:n]
            elif kind == 2:
                yield bytes([rng.randrange(256)]) * n
            else:
                yield b"\xc1SQ" + rng.randbytes(n)

    def test_round_trip(self):
        seed = int(os.environ.get("SEED", "36"))
        rng = random.Random(seed)
        levels = {"zstd": [1, 19], "lz4": [0, 9], "brotli": [0, 11], "gzip": [1, 9], "deflate": [1], "zlib": [9],
                  "snappy": [None], "none": [None]}
        for v in self.values(rng, 40):
            for codec in sf.PORTABLE:
                for level in levels[codec]:
                    for kw in ({}, {"min_size": 0, "min_gain": -1}, {"checksum": False, "min_size": 0, "min_gain": -1}):
                        with self.subTest(seed=seed, codec=codec, level=level, n=len(v), kw=kw):
                            self.assertEqual(sf.decode(sf.encode(v, codec, level, **kw)), v)


if __name__ == "__main__":
    unittest.main()
