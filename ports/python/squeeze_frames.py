"""Read and write squeeze frames (docs/FORMAT.md, version 1) in Python.

Written from docs/FORMAT.md alone. Needs the standard library, plus one
package per codec it meets (Debian: python3-zstandard, python3-lz4,
python3-brotli, python3-snappy); a codec whose package is missing fails with
MissingLibrary when it is used, not at import.

    decode(stored, dictionary=None, max_size=DEFAULT_MAX_SIZE) -> bytes
    encode(value, codec="zstd", level=None, ...) -> bytes

decode reads anything squeeze stores: a value that is not a frame comes
back as it is; a frame of a portable codec (section 8 of FORMAT.md) is
decoded, its checksum verified, its length bounded while decoding. encode
applies squeeze's write policy and returns what to store.
"""

import struct
import zlib
from collections.abc import Mapping

__all__ = [
    "decode", "encode", "parse_header", "crc32c", "redis_dictionaries", "reads_as_number",
    "Header", "FrameError", "CorruptFrame", "TruncatedFrame", "ChecksumMismatch", "TooLarge",
    "UnsupportedVersion", "UnknownCodec", "NotPortable", "GoOnlyCodec", "UnknownDictionary",
    "MissingLibrary", "CODECS", "PORTABLE", "DEFAULT_MAX_SIZE", "MAGIC",
]

MAGIC = b"\xc1SQ"
VERSION = 1
DEFAULT_MAX_SIZE = 512 << 20  # largest original_len decode accepts, as squeeze's
DEFAULT_MIN_SIZE = 64
DEFAULT_MIN_GAIN = 0.10

FLAG_CHECKSUM = 0x01
FLAG_DICT = 0x02

# Codec ids (FORMAT.md section 3). Ids never change.
CODECS = {
    "none": 0x00, "zstd": 0x01, "lz4": 0x02, "s2": 0x03, "snappy": 0x04, "brotli": 0x05,
    "gzip": 0x06, "deflate": 0x07, "zlib": 0x08, "xz": 0x09, "minlz": 0x0A,
}
NAMES = {v: k for k, v in CODECS.items()}
PORTABLE = ("none", "zstd", "lz4", "snappy", "brotli", "gzip", "deflate", "zlib")
GO_ONLY = ("s2", "minlz")


# ---- errors -------------------------------------------------------------

class FrameError(Exception):
    """Base class of every error this module raises for a stored value."""


class CorruptFrame(FrameError, ValueError):
    """The value begins with the magic but is not a valid frame."""


class TruncatedFrame(CorruptFrame):
    """The frame ends inside its header or its payload."""


class ChecksumMismatch(CorruptFrame):
    """The decoded bytes do not match the frame's CRC-32C."""


class TooLarge(FrameError):
    """The frame declares an original length above the limit (nothing was allocated)."""


class UnsupportedVersion(FrameError):
    """The frame's version byte is not one this module reads."""


class UnknownCodec(FrameError):
    """The codec id is not in FORMAT.md (a newer writer, or corruption)."""


class NotPortable(FrameError):
    """The codec is a known one outside the portable profile (xz)."""


class GoOnlyCodec(NotPortable):
    """The codec has no decoder outside Go (s2, minlz): write with a portable codec."""


class UnknownDictionary(FrameError):
    """The frame names a dictionary that was not given (or on a codec that has none)."""


class MissingLibrary(FrameError, ImportError):
    """The Python package for this codec is not installed."""


# ---- CRC-32C (Castagnoli, reflected 0x82F63B78) ------------------------

def _crc_table():
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_CRC_TABLE = _crc_table()


def _crc32c_py(data, crc=0):
    crc ^= 0xFFFFFFFF
    t = _CRC_TABLE
    for b in data:
        crc = t[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


try:  # an optional accelerated implementation, where installed
    import crc32c as _crc32c_mod  # type: ignore

    def crc32c(data):
        """CRC-32C of data, as frames carry it."""
        return _crc32c_mod.crc32c(bytes(data)) & 0xFFFFFFFF
except ImportError:  # pragma: no cover - depends on the machine
    def crc32c(data):
        """CRC-32C of data, as frames carry it."""
        return _crc32c_py(data)


# ---- header -------------------------------------------------------------

class Header:
    """A parsed frame header (FORMAT.md section 2)."""

    __slots__ = ("version", "codec_id", "flags", "original_len", "dict_id", "checksum", "length")

    def __init__(self, version, codec_id, flags, original_len, dict_id, checksum, length):
        self.version, self.codec_id, self.flags = version, codec_id, flags
        self.original_len, self.dict_id, self.checksum, self.length = original_len, dict_id, checksum, length

    @property
    def codec(self):
        return NAMES.get(self.codec_id, "codec(0x%02x)" % self.codec_id)

    def __repr__(self):
        return "Header(codec=%s, original_len=%d, dict_id=%r, checksum=%r, length=%d)" % (
            self.codec, self.original_len, self.dict_id, self.checksum, self.length)


def _uvarint(b, p, what):
    """Reads an unsigned LEB128 varint of at most 10 bytes at b[p:]."""
    x, shift = 0, 0
    for i in range(10):
        if p + i >= len(b):
            raise TruncatedFrame("frame ends inside the %s" % what)
        c = b[p + i]
        if c < 0x80:
            if i == 9 and c > 1:
                raise CorruptFrame("%s overflows 64 bits" % what)
            return x | (c << shift), p + i + 1
        x |= (c & 0x7F) << shift
        shift += 7
    if p + 10 >= len(b):
        raise TruncatedFrame("frame ends inside the %s" % what)
    raise CorruptFrame("%s overflows 64 bits" % what)


def _append_uvarint(out, x):
    while x >= 0x80:
        out.append((x & 0x7F) | 0x80)
        x >>= 7
    out.append(x)


def is_frame(stored):
    """Whether the stored bytes begin with the frame magic."""
    return bytes(stored[:3]) == MAGIC


def parse_header(frame):
    """Parses the header of a frame (bytes that begin with the magic)."""
    b = memoryview(frame).cast("B") if not isinstance(frame, (bytes, bytearray)) else frame
    if not is_frame(b):
        raise CorruptFrame("no frame magic")
    if len(b) < 7:
        raise TruncatedFrame("%d bytes, a header needs at least 7" % len(b))
    version, codec_id, flags = b[3], b[4], b[5]
    if version != VERSION:
        raise UnsupportedVersion("version %d (this module reads version %d)" % (version, VERSION))
    if codec_id not in NAMES:
        raise UnknownCodec("codec id 0x%02x (known: 0x00-0x%02x; written by a newer squeeze?)"
                           % (codec_id, max(NAMES)))
    if flags & ~(FLAG_CHECKSUM | FLAG_DICT) & 0xFF:
        raise CorruptFrame("reserved flag bits set (flags 0x%02x)" % flags)
    original_len, p = _uvarint(b, 6, "original length")
    dict_id = None
    if flags & FLAG_DICT:
        dict_id, p = _uvarint(b, p, "dictionary id")
    checksum = None
    if flags & FLAG_CHECKSUM:
        if len(b) < p + 4:
            raise TruncatedFrame("frame ends inside the checksum")
        checksum = struct.unpack_from("<I", b, p)[0]
        p += 4
    return Header(version, codec_id, flags, original_len, dict_id, checksum, p)


def _header_bytes(codec_id, original_len, checksum=None, dict_id=None):
    out = bytearray(MAGIC)
    flags = (FLAG_CHECKSUM if checksum is not None else 0) | (FLAG_DICT if dict_id is not None else 0)
    out += bytes((VERSION, codec_id, flags))
    _append_uvarint(out, original_len)
    if dict_id is not None:
        _append_uvarint(out, dict_id)
    if checksum is not None:
        out += struct.pack("<I", checksum)
    return out


# ---- codec libraries, imported when first used -------------------------

_DEBIAN = {"zstandard": "python3-zstandard", "lz4.block": "python3-lz4",
           "brotli": "python3-brotli", "snappy": "python3-snappy"}


def _lib(name):
    import importlib
    try:
        return importlib.import_module(name)
    except ImportError as e:
        raise MissingLibrary("the %s codec needs the Python package %s (Debian: apt install %s)"
                             % (name.split(".")[0], name, _DEBIAN.get(name, "?"))) from e


def _zstd_dict(data, want_id):
    zstd = _lib("zstandard")
    data = bytes(data)
    if data[:4] != b"\x37\xa4\x30\xec":
        raise UnknownDictionary("dictionary %d is not in zstd's dictionary format" % want_id)
    got = struct.unpack_from("<I", data, 4)[0]
    if got != want_id:
        raise UnknownDictionary("the dictionary given for id %d has id %d" % (want_id, got))
    return zstd.ZstdCompressionDict(data)


# ---- zstd frame structure (RFC 8878), to refuse a second frame --------

def _zstd_frame_info(p):
    """Walks one zstd frame; returns (content_size or None, end offset)."""
    if len(p) < 5:
        raise TruncatedFrame("zstd payload of %d bytes" % len(p))
    if bytes(p[:4]) != b"\x28\xb5\x2f\xfd":
        raise CorruptFrame("zstd payload does not start with a zstd frame")
    fhd = p[4]
    fcs_flag, single, dict_flag = fhd >> 6, (fhd >> 5) & 1, fhd & 3
    if fhd & 0x08:
        raise CorruptFrame("zstd frame header has its reserved bit set")
    pos = 5 + (0 if single else 1)
    pos += (0, 1, 2, 4)[dict_flag]
    fcs_len = (1 if single else 0, 2, 4, 8)[fcs_flag]
    if len(p) < pos + fcs_len:
        raise TruncatedFrame("zstd payload ends inside the frame header")
    content_size = None
    if fcs_len:
        content_size = int.from_bytes(p[pos:pos + fcs_len], "little") + (256 if fcs_len == 2 else 0)
    pos += fcs_len
    while True:
        if len(p) < pos + 3:
            raise TruncatedFrame("zstd payload ends inside a block header")
        bh = p[pos] | p[pos + 1] << 8 | p[pos + 2] << 16
        last, btype, bsize = bh & 1, (bh >> 1) & 3, bh >> 3
        if btype == 3:
            raise CorruptFrame("zstd block of the reserved type")
        pos += 3 + (1 if btype == 1 else bsize)
        if len(p) < pos:
            raise TruncatedFrame("zstd payload ends inside a block")
        if last:
            break
    if fhd & 0x04:
        pos += 4
        if len(p) < pos:
            raise TruncatedFrame("zstd payload ends inside the frame's checksum")
    return content_size, pos


# ---- decoding -----------------------------------------------------------

_WBITS = {0x06: 31, 0x07: -15, 0x08: 15}
_BROTLI_PIECE = 32  # payload bytes fed to brotli at a time: bounds the output between checks


def _inflate(codec_id, payload, n):
    d = zlib.decompressobj(_WBITS[codec_id])
    try:
        out = d.decompress(payload, n + 1)
    except zlib.error as e:
        raise CorruptFrame("%s payload: %s" % (NAMES[codec_id], e)) from None
    if len(out) > n:
        raise CorruptFrame("%s payload decodes to more than %d bytes" % (NAMES[codec_id], n))
    if not d.eof:
        raise TruncatedFrame("%s payload ends after %d of %d bytes" % (NAMES[codec_id], len(out), n))
    if d.unused_data or d.unconsumed_tail:
        raise CorruptFrame("%d bytes after the %s stream" % (len(d.unused_data) + len(d.unconsumed_tail),
                                                           NAMES[codec_id]))
    return out


def _brotli(payload, n):
    brotli = _lib("brotli")
    d = brotli.Decompressor()
    out = bytearray()
    pos = 0
    try:
        while pos < len(payload):
            if d.is_finished():
                raise CorruptFrame("%d bytes after the brotli stream" % (len(payload) - pos))
            out += d.process(bytes(payload[pos:pos + _BROTLI_PIECE]))
            pos += _BROTLI_PIECE
            if len(out) > n:
                raise CorruptFrame("brotli payload decodes to more than %d bytes" % n)
    except brotli.error as e:
        raise CorruptFrame("brotli payload: %s" % e) from None
    if not d.is_finished():
        raise TruncatedFrame("brotli payload ends after %d of %d bytes" % (len(out), n))
    return bytes(out)


def _zstd(payload, n, dict_id, dictionary):
    zstd = _lib("zstandard")
    content_size, end = _zstd_frame_info(payload)
    if end != len(payload):
        raise CorruptFrame("%d bytes after the zstd frame" % (len(payload) - end))
    if content_size is not None and content_size != n:
        raise CorruptFrame("zstd frame declares %d bytes, header says %d" % (content_size, n))
    kwargs = {}
    if dict_id is not None:
        kwargs["dict_data"] = dictionary
    try:
        d = zstd.ZstdDecompressor(**kwargs)
        # With a content size zstd decodes into exactly that many bytes;
        # without one, max_output_size bounds it.
        return d.decompress(bytes(payload), max_output_size=max(n, 1))
    except zstd.ZstdError as e:
        raise CorruptFrame("zstd payload: %s" % e) from None


def _lz4(payload, n):
    if len(payload) * 256 + 16 < n:
        raise CorruptFrame("%d byte lz4 payload cannot hold %d bytes" % (len(payload), n))
    if n == 0:
        if bytes(payload) != b"\x00":
            raise CorruptFrame("lz4 payload of an empty value must be one zero byte")
        return b""
    block = _lib("lz4.block")
    try:
        return block.decompress(bytes(payload), uncompressed_size=n)
    except block.LZ4BlockError as e:
        raise CorruptFrame("lz4 payload: %s" % e) from None


def _snappy(payload, n):
    dl, _ = _uvarint(payload, 0, "snappy block's length")
    if dl != n:
        raise CorruptFrame("snappy block holds %d bytes, header says %d" % (dl, n))
    snappy = _lib("snappy")
    try:
        return snappy.uncompress(bytes(payload))
    except Exception as e:  # python-snappy raises its own UncompressError, or zlib-like errors
        raise CorruptFrame("snappy payload: %s" % e) from None


def _lookup_dictionary(dictionary, dict_id):
    if dictionary is None:
        return None
    if isinstance(dictionary, Mapping):
        return dictionary.get(dict_id)
    return dictionary(dict_id)


def decode(stored, dictionary=None, max_size=DEFAULT_MAX_SIZE):
    """Returns the value squeeze stored as `stored`.

    Bytes that do not begin with the magic are the value as it is. A frame
    is decoded and its checksum verified; a frame that is not valid raises a
    FrameError (CorruptFrame, TruncatedFrame, ChecksumMismatch, TooLarge,
    UnsupportedVersion, UnknownCodec, GoOnlyCodec, NotPortable,
    UnknownDictionary), never returns partial or unverified data.

    dictionary: for frames compressed with a zstd dictionary, a callable
    taking the dictionary id (an int) and returning the dictionary's bytes or
    None, or a mapping from id to bytes (see redis_dictionaries).
    max_size: the largest original length accepted (default 512 MiB, as
    squeeze's decoder); larger frames raise TooLarge before any allocation.
    """
    if isinstance(stored, str):
        raise TypeError("decode takes bytes, not str (read values from Redis as bytes)")
    if not is_frame(stored):
        return bytes(stored)
    h = parse_header(stored)
    n = h.original_len
    if n > max_size:
        raise TooLarge("frame declares %d bytes, limit is %d" % (n, max_size))
    name = NAMES[h.codec_id]
    if name in GO_ONLY:
        raise GoOnlyCodec("the %s codec (0x%02x) has no decoder outside Go: read this value through "
                          "squeeze, or write it with a portable codec" % (name, h.codec_id))
    if name not in PORTABLE:
        raise NotPortable("the %s codec (0x%02x) is not in the portable profile" % (name, h.codec_id))
    zdict = None
    if h.dict_id is not None:
        if name != "zstd":
            raise UnknownDictionary("dictionary id %d on a %s frame" % (h.dict_id, name))
        data = _lookup_dictionary(dictionary, h.dict_id)
        if data is None:
            raise UnknownDictionary("dictionary id %d was not given" % h.dict_id)
        zdict = _zstd_dict(data, h.dict_id)
    payload = memoryview(stored)[h.length:]
    if name == "none":
        if len(payload) != n:
            cls = TruncatedFrame if len(payload) < n else CorruptFrame
            raise cls("none payload has %d bytes, header says %d" % (len(payload), n))
        out = bytes(payload)
    elif name == "zstd":
        out = _zstd(payload, n, h.dict_id, zdict)
    elif name == "lz4":
        out = _lz4(payload, n)
    elif name == "snappy":
        out = _snappy(payload, n)
    elif name == "brotli":
        out = _brotli(payload, n)
    else:
        out = _inflate(h.codec_id, payload, n)
    if len(out) != n:
        cls = TruncatedFrame if len(out) < n else CorruptFrame
        raise cls("%s payload decodes to %d bytes, header says %d" % (name, len(out), n))
    if h.checksum is not None:
        got = crc32c(out)
        if got != h.checksum:
            raise ChecksumMismatch("crc32c %08x, header says %08x" % (got, h.checksum))
    return bytes(out)


def redis_dictionaries(client):
    """A dictionary callback for decode that reads squeeze:dict:<id> from Redis.

    client is a redis-py client (decode_responses must be off). Dictionaries
    are cached: squeeze never changes a dictionary's bytes under its id.
    """
    cache = {}

    def lookup(dict_id):
        if dict_id not in cache:
            data = client.get("squeeze:dict:%d" % dict_id)
            if data is None:
                return None
            cache[dict_id] = data
        return cache[dict_id]
    return lookup


# ---- encoding -----------------------------------------------------------

def reads_as_number(value):
    """Whether C's strtod would consume all of value (FORMAT.md section 4)."""
    b = bytes(value)
    i = 0
    while i < len(b) and (b[i] == 0x20 or 0x09 <= b[i] <= 0x0D):
        i += 1
    if i < len(b) and b[i] in b"+-":
        i += 1
    rest = b[i:]
    if not rest:
        return False
    low = rest.lower()
    if low in (b"inf", b"infinity", b"nan"):
        return True
    if len(rest) > 4 and low[:4] == b"nan(" and rest[-1:] == b")":
        return all(c == 0x5F or chr(c).isascii() and chr(c).isalnum() for c in rest[4:-1])
    if len(rest) > 2 and rest[0:1] == b"0" and rest[1] in b"xX" and _number(rest[2:], b"0123456789abcdefABCDEF", b"pP"):
        return True
    return _number(rest, b"0123456789", b"eE")


def _number(b, digits, marker):
    i, n, dot = 0, 0, False
    while i < len(b):
        if b[i] in digits:
            n += 1
        elif b[i] == 0x2E and not dot:
            dot = True
        else:
            break
        i += 1
    if n == 0:
        return False
    e = b[i:]
    if not e:
        return True
    if e[0] not in marker:
        return False
    e = e[1:]
    if e[:1] in (b"+", b"-"):
        e = e[1:]
    return len(e) > 0 and all(0x30 <= c <= 0x39 for c in e)


_DEFAULT_LEVEL = {"zstd": 3, "lz4": 0, "snappy": None, "brotli": 6, "gzip": 6, "deflate": 6, "zlib": 6, "none": None}


def _compress(name, value, level, zdict):
    if name == "zstd":
        zstd = _lib("zstandard")
        kw = {"level": level, "write_checksum": False, "write_content_size": True}
        if zdict is not None:
            kw["dict_data"] = zdict
        try:
            return zstd.ZstdCompressor(**kw).compress(value)
        except zstd.ZstdError as e:
            if zdict is None:
                raise
            # libzstd 1.5.4 (Debian 12's zstandard) refuses to compress with
            # the dictionaries squeeze's Go trainer writes, and decompresses
            # with them fine; libzstd 1.5.7 compresses with them too.
            raise ValueError("libzstd %s cannot compress with dictionary %d (%s); it can still decode "
                             "frames written with it. Use a newer zstandard, or train the dictionary "
                             "with zstd --train or zstandard.train_dictionary" % (
                                 ".".join(map(str, zstd.ZSTD_VERSION)), zdict.dict_id(), e)) from None
    if name == "lz4":
        block = _lib("lz4.block")
        if level == 0:
            return block.compress(value, store_size=False)
        return block.compress(value, mode="high_compression", compression=level, store_size=False)
    if name == "snappy":
        return _lib("snappy").compress(value)
    if name == "brotli":
        return _lib("brotli").compress(value, quality=level)
    if name == "gzip":
        c = zlib.compressobj(level, zlib.DEFLATED, 31)
    elif name == "deflate":
        c = zlib.compressobj(level, zlib.DEFLATED, -15)
    else:
        c = zlib.compressobj(level, zlib.DEFLATED, 15)
    return c.compress(value) + c.flush()


def _level(name, level):
    if level is None:
        return _DEFAULT_LEVEL[name]
    if name == "lz4" and isinstance(level, str):
        if level == "fast":
            return 0
        if level.startswith("hc") and level[2:].isdigit() and 1 <= int(level[2:]) <= 9:
            return int(level[2:])
    ranges = {"zstd": (1, 22), "lz4": (0, 9), "brotli": (0, 11), "gzip": (1, 9), "deflate": (1, 9), "zlib": (1, 9)}
    if name in ranges and isinstance(level, int) and ranges[name][0] <= level <= ranges[name][1]:
        return level
    raise ValueError("level %r is not one of %s's" % (level, name))


def encode(value, codec="zstd", level=None, *, dictionary=None, checksum=True,
           min_size=DEFAULT_MIN_SIZE, min_gain=DEFAULT_MIN_GAIN):
    """Returns what squeeze stores for value, written with a portable codec.

    Applies the write policy of FORMAT.md section 4: values shorter than
    min_size, values that read as numbers or HyperLogLogs, and values that
    compress by less than min_gain are returned as they are (wrapped in a
    none frame if they begin with the magic); a negative min_gain keeps
    every compressed frame. codec is a name from PORTABLE; level is the
    codec's own (zstd 1-22, lz4 0 or "fast" and 1-9 or "hcN", brotli 0-11,
    gzip/deflate/zlib 1-9). dictionary is a zstd dictionary's bytes (zstd
    only); the frame then carries its id.
    """
    if isinstance(value, str):
        raise TypeError("encode takes bytes, not str (encode text as UTF-8 first)")
    value = bytes(value)
    name = codec.lower()
    if name in GO_ONLY:
        raise GoOnlyCodec("the %s codec has no encoder outside Go; portable codecs: %s" % (name, ", ".join(PORTABLE)))
    if name not in CODECS:
        raise UnknownCodec("unknown codec %r (portable: %s)" % (codec, ", ".join(PORTABLE)))
    if name not in PORTABLE:
        raise NotPortable("the %s codec is not in the portable profile (%s)" % (name, ", ".join(PORTABLE)))
    if not (min_gain < 1):
        raise ValueError("min_gain %r must be below 1" % min_gain)
    lvl = _level(name, level)
    dict_id = zdict = None
    if dictionary is not None:
        if name != "zstd":
            raise ValueError("dictionaries work with zstd, not %s" % name)
        dictionary = bytes(dictionary)
        if dictionary[:4] != b"\x37\xa4\x30\xec" or len(dictionary) < 8:
            raise ValueError("not a zstd dictionary")
        dict_id = struct.unpack_from("<I", dictionary, 4)[0]
        zdict = _zstd_dict(dictionary, dict_id)
    if (len(value) >= min_size and name != "none" and not reads_as_number(value)
            and value[:4] != b"HYLL"):
        sum_ = crc32c(value) if checksum else None
        frame = _header_bytes(CODECS[name], len(value), sum_, dict_id)
        frame += _compress(name, value, lvl, zdict)
        if min_gain < 0 or len(frame) <= int(len(value) * (1 - min_gain)):
            return bytes(frame)
    if not is_frame(value):
        return value
    return bytes(_header_bytes(0, len(value), crc32c(value) if checksum else None) + value)


def _main(argv):
    """squeeze_frames.py decode [--files FILE...] < stored > value
    squeeze_frames.py encode CODEC [LEVEL] [--frame] [--dict FILE] [--files FILE...] < value > stored

    --frame writes a frame whatever the value (no minimum size or gain), for
    tests; without it encode applies the write policy. --dict compresses
    with a zstd dictionary. --files reads each FILE and writes FILE.out
    instead of using stdin and stdout."""
    import sys
    files = []
    if "--files" in argv:
        i = argv.index("--files")
        argv, files = argv[:i], argv[i + 1:]
    dictionary = None
    if "--dict" in argv:
        i = argv.index("--dict")
        with open(argv[i + 1], "rb") as f:
            dictionary = f.read()
        argv = argv[:i] + argv[i + 2:]
    args = [a for a in argv if a != "--frame"]
    if args[:1] == ["decode"] and len(args) == 1:
        def run(data):
            return decode(data)
    elif args[:1] == ["encode"] and len(args) in (2, 3):
        level = args[2] if len(args) == 3 else None
        if level is not None and level.lstrip("-").isdigit():
            level = int(level)
        kw = {"min_size": 0, "min_gain": -1} if "--frame" in argv else {}
        kw["dictionary"] = dictionary

        def run(data):
            return encode(data, args[1], level, **kw)
    else:
        sys.stderr.write(_main.__doc__ + "\n")
        return 2
    try:
        if not files:
            sys.stdout.buffer.write(run(sys.stdin.buffer.read()))
        for name in files:
            with open(name, "rb") as f:
                out = run(f.read())
            with open(name + ".out", "wb") as f:
                f.write(out)
    except (FrameError, ValueError) as e:
        sys.stderr.write("%s: %s\n" % (type(e).__name__, e))
        return 1
    return 0


if __name__ == "__main__":
    import sys
    sys.exit(_main(sys.argv[1:]))
