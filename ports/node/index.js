'use strict';
// squeeze-frames: read and write squeeze frames (docs/FORMAT.md, version 1)
// in Node. Written from docs/FORMAT.md alone. gzip, deflate, zlib and brotli
// use Node's zlib; zstd, lz4 and snappy use @toondepauw/node-zstd, lz4-napi
// and snappy (prebuilt, nothing to compile), loaded when first needed.

const zlib = require('node:zlib');

const MAGIC = Buffer.from([0xc1, 0x53, 0x51]);
const VERSION = 1;
const DEFAULT_MAX_SIZE = 512 * 1024 * 1024; // as squeeze's Go decoder
const DEFAULT_MIN_SIZE = 64;
const DEFAULT_MIN_GAIN = 0.1;
const FLAG_CHECKSUM = 1;
const FLAG_DICT = 2;

const CODECS = {
  none: 0x00, zstd: 0x01, lz4: 0x02, s2: 0x03, snappy: 0x04, brotli: 0x05,
  gzip: 0x06, deflate: 0x07, zlib: 0x08, xz: 0x09, minlz: 0x0a,
};
const NAMES = Object.fromEntries(Object.entries(CODECS).map(([k, v]) => [v, k]));
const PORTABLE = ['none', 'zstd', 'lz4', 'snappy', 'brotli', 'gzip', 'deflate', 'zlib'];
const GO_ONLY = ['s2', 'minlz'];

// ---- errors ---------------------------------------------------------------

class FrameError extends Error {
  constructor(message) { super(message); this.name = this.constructor.name; }
}
/** The value begins with the magic but is not a valid frame. */
class CorruptFrame extends FrameError {}
/** The frame ends inside its header or its payload. */
class TruncatedFrame extends CorruptFrame {}
/** The decoded bytes do not match the frame's CRC-32C. */
class ChecksumMismatch extends CorruptFrame {}
/** The frame declares an original length above the limit (nothing was allocated). */
class TooLarge extends FrameError {}
class UnsupportedVersion extends FrameError {}
/** The codec id is not in FORMAT.md (a newer writer, or corruption). */
class UnknownCodec extends FrameError {}
/** A known codec outside the portable profile (xz). */
class NotPortable extends FrameError {}
/** A codec with no decoder outside Go (s2, minlz). */
class GoOnlyCodec extends NotPortable {}
/** The frame names a dictionary that was not given. */
class UnknownDictionary extends FrameError {}
/** The npm package a codec needs is not installed. */
class MissingLibrary extends FrameError {}

// ---- CRC-32C ---------------------------------------------------------------

const CRC_TABLE = (() => {
  const t = new Int32Array(256);
  for (let i = 0; i < 256; i++) {
    let c = i;
    for (let k = 0; k < 8; k++) c = c & 1 ? (c >>> 1) ^ 0x82f63b78 : c >>> 1;
    t[i] = c;
  }
  return t;
})();

/** CRC-32C (Castagnoli) of buf, as frames carry it. */
function crc32c(buf) {
  let c = -1;
  for (let i = 0; i < buf.length; i++) c = CRC_TABLE[(c ^ buf[i]) & 0xff] ^ (c >>> 8);
  return (c ^ -1) >>> 0;
}

// ---- header ----------------------------------------------------------------

function uvarint(b, p, what) {
  let x = 0n;
  let shift = 0n;
  for (let i = 0; i < 10; i++) {
    if (p + i >= b.length) throw new TruncatedFrame(`frame ends inside the ${what}`);
    const c = b[p + i];
    if (c < 0x80) {
      if (i === 9 && c > 1) throw new CorruptFrame(`${what} overflows 64 bits`);
      return [x | (BigInt(c) << shift), p + i + 1];
    }
    x |= BigInt(c & 0x7f) << shift;
    shift += 7n;
  }
  if (p + 10 >= b.length) throw new TruncatedFrame(`frame ends inside the ${what}`);
  throw new CorruptFrame(`${what} overflows 64 bits`);
}

function appendUvarint(out, x) {
  let v = BigInt(x);
  while (v >= 0x80n) { out.push(Number(v & 0x7fn) | 0x80); v >>= 7n; }
  out.push(Number(v));
}

function isFrame(b) {
  return b.length >= 3 && b[0] === 0xc1 && b[1] === 0x53 && b[2] === 0x51;
}

/**
 * Parses the header of a frame. originalLen and dictId are BigInts (the
 * format allows 64 bits); checksum is a number or null.
 */
function parseHeader(b) {
  if (!isFrame(b)) throw new CorruptFrame('no frame magic');
  if (b.length < 7) throw new TruncatedFrame(`${b.length} bytes, a header needs at least 7`);
  const [version, codecId, flags] = [b[3], b[4], b[5]];
  if (version !== VERSION) throw new UnsupportedVersion(`version ${version} (this package reads version ${VERSION})`);
  if (!(codecId in NAMES)) throw new UnknownCodec(`codec id 0x${codecId.toString(16).padStart(2, '0')} (written by a newer squeeze?)`);
  if (flags & ~(FLAG_CHECKSUM | FLAG_DICT)) throw new CorruptFrame(`reserved flag bits set (flags 0x${flags.toString(16)})`);
  let [originalLen, p] = uvarint(b, 6, 'original length');
  let dictId = null;
  if (flags & FLAG_DICT) [dictId, p] = uvarint(b, p, 'dictionary id');
  let checksum = null;
  if (flags & FLAG_CHECKSUM) {
    if (b.length < p + 4) throw new TruncatedFrame('frame ends inside the checksum');
    checksum = b.readUInt32LE(p);
    p += 4;
  }
  return { version, codecId, codec: NAMES[codecId], flags, originalLen, dictId, checksum, length: p };
}

function headerBytes(codecId, originalLen, checksum, dictId) {
  const out = [0xc1, 0x53, 0x51, VERSION, codecId,
    (checksum != null ? FLAG_CHECKSUM : 0) | (dictId != null ? FLAG_DICT : 0)];
  appendUvarint(out, originalLen);
  if (dictId != null) appendUvarint(out, dictId);
  const h = Buffer.from(out);
  if (checksum == null) return h;
  const c = Buffer.alloc(4);
  c.writeUInt32LE(checksum);
  return Buffer.concat([h, c]);
}

// ---- codec libraries --------------------------------------------------------

const libs = {};
function lib(name) {
  if (!(name in libs)) {
    try {
      libs[name] = require(name);
    } catch (e) {
      throw new MissingLibrary(`the npm package ${name} is not installed (npm ci in ports/node): ${e.message}`);
    }
  }
  return libs[name];
}

const ZSTD_DICT_MAGIC = 0xec30a437;

function checkDictionary(data, id) {
  if (!Buffer.isBuffer(data)) data = Buffer.from(data);
  if (data.length < 8 || data.readUInt32LE(0) !== ZSTD_DICT_MAGIC) {
    throw new UnknownDictionary(`dictionary ${id} is not in zstd's dictionary format`);
  }
  const got = data.readUInt32LE(4);
  if (BigInt(got) !== BigInt(id)) throw new UnknownDictionary(`the dictionary given for id ${id} has id ${got}`);
  return data;
}

// Walks one zstd frame (RFC 8878): returns its header length, where its
// content size field sits, the content size or null, and where it ends.
function zstdFrameInfo(p) {
  if (p.length < 5) throw new TruncatedFrame(`zstd payload of ${p.length} bytes`);
  if (p.readUInt32LE(0) !== 0xfd2fb528) throw new CorruptFrame('zstd payload does not start with a zstd frame');
  const fhd = p[4];
  const fcsFlag = fhd >> 6;
  const single = (fhd >> 5) & 1;
  if (fhd & 0x08) throw new CorruptFrame('zstd frame header has its reserved bit set');
  let pos = 5 + (single ? 0 : 1) + [0, 1, 2, 4][fhd & 3];
  const fcsAt = pos;
  const fcsLen = [single ? 1 : 0, 2, 4, 8][fcsFlag];
  if (p.length < pos + fcsLen) throw new TruncatedFrame('zstd payload ends inside the frame header');
  let contentSize = null;
  if (fcsLen) {
    contentSize = 0n;
    for (let i = fcsLen - 1; i >= 0; i--) contentSize = (contentSize << 8n) | BigInt(p[pos + i]);
    if (fcsLen === 2) contentSize += 256n;
  }
  pos += fcsLen;
  for (;;) {
    if (p.length < pos + 3) throw new TruncatedFrame('zstd payload ends inside a block header');
    const bh = p[pos] | (p[pos + 1] << 8) | (p[pos + 2] << 16);
    const last = bh & 1;
    const type = (bh >> 1) & 3;
    const size = bh >>> 3;
    if (type === 3) throw new CorruptFrame('zstd block of the reserved type');
    pos += 3 + (type === 1 ? 1 : size);
    if (p.length < pos) throw new TruncatedFrame('zstd payload ends inside a block');
    if (last) break;
  }
  if (fhd & 0x04) {
    pos += 4;
    if (p.length < pos) throw new TruncatedFrame("zstd payload ends inside the frame's checksum");
  }
  return { fcsAt, contentSize, end: pos };
}

const zstdDecoders = new Map(); // dictionary buffer -> Decoder

function decodeZstd(payload, n, dictionary) {
  const info = zstdFrameInfo(payload);
  if (info.end !== payload.length) throw new CorruptFrame(`${payload.length - info.end} bytes after the zstd frame`);
  if (info.contentSize !== null && info.contentSize !== BigInt(n)) {
    throw new CorruptFrame(`zstd frame declares ${info.contentSize} bytes, header says ${n}`);
  }
  if (info.contentSize === null) {
    // The binding reads to the end with no limit: give the frame the
    // content size the squeeze header declares (an 8-byte field), and
    // libzstd stops as soon as the output passes it.
    const fcs = Buffer.alloc(8);
    fcs.writeBigUInt64LE(BigInt(n));
    const fhd = Buffer.from([payload[4] | 0xc0]);
    payload = Buffer.concat([payload.subarray(0, 4), fhd, payload.subarray(5, info.fcsAt), fcs, payload.subarray(info.fcsAt)]);
  }
  const { Decoder } = lib('@toondepauw/node-zstd');
  let d = zstdDecoders.get(dictionary || null);
  if (!d) {
    d = new Decoder(dictionary || undefined);
    if (zstdDecoders.size > 64) zstdDecoders.clear();
    zstdDecoders.set(dictionary || null, d);
  }
  try {
    return d.decodeSync(payload);
  } catch (e) {
    throw new CorruptFrame(`zstd payload: ${e.message}`);
  }
}

function decodeLZ4(payload, n) {
  if (payload.length * 256 + 16 < n) throw new CorruptFrame(`${payload.length} byte lz4 payload cannot hold ${n} bytes`);
  if (n === 0) {
    if (payload.length !== 1 || payload[0] !== 0) throw new CorruptFrame('lz4 payload of an empty value must be one zero byte');
    return Buffer.alloc(0);
  }
  const size = Buffer.alloc(4);
  size.writeUInt32LE(n); // lz4-napi's blocks carry their size first
  try {
    return lib('lz4-napi').uncompressSync(Buffer.concat([size, payload]));
  } catch (e) {
    throw new CorruptFrame(`lz4 payload: ${e.message}`);
  }
}

function decodeSnappy(payload, n) {
  const [dl] = uvarint(payload, 0, "snappy block's length");
  if (dl !== BigInt(n)) throw new CorruptFrame(`snappy block holds ${dl} bytes, header says ${n}`);
  try {
    return lib('snappy').uncompressSync(payload, { asBuffer: true });
  } catch (e) {
    throw new CorruptFrame(`snappy payload: ${e.message}`);
  }
}

const INFLATE = {
  brotli: zlib.brotliDecompressSync,
  gzip: zlib.gunzipSync,
  deflate: zlib.inflateRawSync,
  zlib: zlib.inflateSync,
};

function decodeStream(name, payload, n) {
  let r;
  try {
    r = INFLATE[name](payload, { maxOutputLength: Math.max(n, 1), info: true });
  } catch (e) {
    if (e.code === 'ERR_BUFFER_TOO_LARGE') throw new CorruptFrame(`${name} payload decodes to more than ${n} bytes`);
    if (/unexpected end/i.test(e.message)) throw new TruncatedFrame(`${name} payload: ${e.message}`);
    throw new CorruptFrame(`${name} payload: ${e.message}`);
  }
  if (r.engine.bytesWritten !== payload.length) {
    throw new CorruptFrame(`${payload.length - r.engine.bytesWritten} bytes after the ${name} stream`);
  }
  return r.buffer;
}

function lookupDictionary(dictionary, id) {
  if (dictionary == null) return null;
  const num = Number(id);
  if (typeof dictionary === 'function') return dictionary(num);
  if (dictionary instanceof Map) return dictionary.get(num) ?? dictionary.get(id) ?? null;
  return dictionary[num] ?? null;
}

function toBuffer(stored, fn) {
  if (typeof stored === 'string') throw new TypeError(`${fn} takes a Buffer, not a string (read values from Redis as Buffers)`);
  if (Buffer.isBuffer(stored)) return stored;
  if (stored instanceof Uint8Array) return Buffer.from(stored.buffer, stored.byteOffset, stored.byteLength);
  throw new TypeError(`${fn} takes a Buffer or Uint8Array`);
}

/**
 * Returns the value squeeze stored as `stored` (a Buffer). Bytes that do not
 * begin with the magic are the value as they are. A frame is decoded and its
 * checksum verified; an invalid one throws a FrameError subclass, never
 * returns partial or unverified data.
 *
 * options.dictionary: for frames written with a zstd dictionary, a function
 * from the id (a number) to the dictionary's bytes (or null), a Map or an
 * object keyed by id. For lookups that return Promises use decodeAsync.
 * options.maxSize: the largest original length accepted (512 MiB).
 */
function decode(stored, options = {}) {
  const b = toBuffer(stored, 'decode');
  if (!isFrame(b)) return b;
  const h = parseHeader(b);
  const maxSize = options.maxSize ?? DEFAULT_MAX_SIZE;
  if (h.originalLen > BigInt(maxSize)) throw new TooLarge(`frame declares ${h.originalLen} bytes, limit is ${maxSize}`);
  const n = Number(h.originalLen);
  const name = h.codec;
  if (GO_ONLY.includes(name)) {
    throw new GoOnlyCodec(`the ${name} codec (0x${h.codecId.toString(16).padStart(2, '0')}) has no decoder outside Go: read this value through squeeze, or write it with a portable codec`);
  }
  if (!PORTABLE.includes(name)) throw new NotPortable(`the ${name} codec is not in the portable profile`);
  let dict = null;
  if (h.dictId !== null) {
    if (name !== 'zstd') throw new UnknownDictionary(`dictionary id ${h.dictId} on a ${name} frame`);
    const data = h.dictId < 2n ** 32n ? lookupDictionary(options.dictionary, h.dictId) : null;
    if (data == null) throw new UnknownDictionary(`dictionary id ${h.dictId} was not given`);
    if (typeof data.then === 'function') throw new TypeError('the dictionary lookup returned a Promise: use decodeAsync');
    dict = checkDictionary(data, h.dictId);
  }
  const payload = b.subarray(h.length);
  let out;
  switch (name) {
    case 'none':
      if (payload.length !== n) {
        const E = payload.length < n ? TruncatedFrame : CorruptFrame;
        throw new E(`none payload has ${payload.length} bytes, header says ${n}`);
      }
      out = Buffer.from(payload);
      break;
    case 'zstd': out = decodeZstd(payload, n, dict); break;
    case 'lz4': out = decodeLZ4(payload, n); break;
    case 'snappy': out = decodeSnappy(payload, n); break;
    default: out = decodeStream(name, payload, n);
  }
  if (out.length !== n) {
    const E = out.length < n ? TruncatedFrame : CorruptFrame;
    throw new E(`${name} payload decodes to ${out.length} bytes, header says ${n}`);
  }
  if (h.checksum !== null) {
    const got = crc32c(out);
    if (got !== h.checksum) throw new ChecksumMismatch(`crc32c ${got.toString(16)}, header says ${h.checksum.toString(16)}`);
  }
  return out;
}

/** decode, for dictionary lookups that return Promises (such as redisDictionaries). */
async function decodeAsync(stored, options = {}) {
  const b = toBuffer(stored, 'decodeAsync');
  if (isFrame(b) && b.length >= 7 && b[5] & FLAG_DICT && options.dictionary) {
    const h = parseHeader(b);
    if (h.dictId < 2n ** 32n) {
      const data = await lookupDictionary(options.dictionary, h.dictId);
      const dictionary = new Map(data == null ? [] : [[Number(h.dictId), data]]);
      return decode(b, { ...options, dictionary });
    }
  }
  return decode(b, options);
}

/**
 * A dictionary lookup for decodeAsync that reads squeeze:dict:<id> with an
 * ioredis or node-redis client (as a Buffer), cached: squeeze never changes
 * a dictionary's bytes under its id.
 */
function redisDictionaries(client) {
  const cache = new Map();
  return async (id) => {
    if (!cache.has(id)) {
      const key = `squeeze:dict:${id}`;
      const data = typeof client.getBuffer === 'function'
        ? await client.getBuffer(key) // ioredis
        : await client.get(client.commandOptions ? client.commandOptions({ returnBuffers: true }) : key, key);
      if (data == null) return null;
      cache.set(id, data);
    }
    return cache.get(id);
  };
}

// ---- encoding ---------------------------------------------------------------

/** Whether C's strtod would consume all of value (FORMAT.md section 4). */
function readsAsNumber(value) {
  const b = toBuffer(value, 'readsAsNumber');
  let i = 0;
  while (i < b.length && (b[i] === 0x20 || (b[i] >= 0x09 && b[i] <= 0x0d))) i++;
  if (i < b.length && (b[i] === 0x2b || b[i] === 0x2d)) i++;
  const rest = b.subarray(i).toString('latin1');
  if (rest.length === 0) return false;
  const low = rest.toLowerCase();
  if (low === 'inf' || low === 'infinity' || low === 'nan') return true;
  if (/^nan\([0-9A-Za-z_]*\)$/i.test(rest)) return true;
  if (/^0x([0-9a-f]+\.?[0-9a-f]*|\.[0-9a-f]+)(p[+-]?[0-9]+)?$/i.test(rest)) return true;
  return /^([0-9]+\.?[0-9]*|\.[0-9]+)(e[+-]?[0-9]+)?$/i.test(rest);
}

const LEVELS = {
  none: [null, null, null], zstd: [3, 1, 22], lz4: [0, 0, 0], snappy: [null, null, null],
  brotli: [6, 0, 11], gzip: [6, 1, 9], deflate: [6, 1, 9], zlib: [6, 1, 9],
};

function level(name, lvl) {
  const [def, lo, hi] = LEVELS[name];
  if (lvl == null) return def;
  if (name === 'lz4' && lvl === 'fast') return 0;
  if (Number.isInteger(lvl) && lo !== null && lvl >= lo && lvl <= hi) return lvl;
  const more = name === 'lz4' ? ' (lz4-napi has only the fast compressor: "fast" or 0)' : '';
  throw new RangeError(`level ${lvl} is not one of ${name}'s${more}`);
}

function compress(name, value, lvl, dict) {
  switch (name) {
    case 'zstd': {
      const { Encoder } = lib('@toondepauw/node-zstd');
      try {
        return new Encoder(lvl, dict || undefined).encodeSync(value);
      } catch (e) {
        if (!dict) throw e;
        throw new RangeError(`libzstd cannot compress with dictionary ${dict.readUInt32LE(4)} (${e.message}); it can still decode frames written with it. Train one with zstd --train to write from Node`);
      }
    }
    case 'lz4': return lib('lz4-napi').compressSync(value).subarray(4); // drop lz4-napi's size prefix
    case 'snappy': return lib('snappy').compressSync(value);
    case 'brotli': return zlib.brotliCompressSync(value, { params: { [zlib.constants.BROTLI_PARAM_QUALITY]: lvl, [zlib.constants.BROTLI_PARAM_SIZE_HINT]: value.length } });
    case 'gzip': return zlib.gzipSync(value, { level: lvl });
    case 'deflate': return zlib.deflateRawSync(value, { level: lvl });
    case 'zlib': return zlib.deflateSync(value, { level: lvl });
  }
  throw new Error(`no compressor for ${name}`);
}

/**
 * Returns what squeeze stores for value (a Buffer), written with a portable
 * codec under the write policy of FORMAT.md section 4: values shorter than
 * minSize, numbers, HyperLogLogs and values that compress by less than
 * minGain are returned as they are (wrapped in a none frame if they begin
 * with the magic); a negative minGain keeps every compressed frame.
 * options: { dictionary (zstd dictionary bytes), checksum (true), minSize (64), minGain (0.1) }.
 */
function encode(value, codec = 'zstd', lvl = null, options = {}) {
  const v = toBuffer(value, 'encode');
  const name = String(codec).toLowerCase();
  if (GO_ONLY.includes(name)) throw new GoOnlyCodec(`the ${name} codec has no encoder outside Go; portable codecs: ${PORTABLE.join(', ')}`);
  if (!(name in CODECS)) throw new UnknownCodec(`unknown codec ${codec} (portable: ${PORTABLE.join(', ')})`);
  if (!PORTABLE.includes(name)) throw new NotPortable(`the ${name} codec is not in the portable profile (${PORTABLE.join(', ')})`);
  const { checksum = true, minSize = DEFAULT_MIN_SIZE, minGain = DEFAULT_MIN_GAIN } = options;
  if (!(minGain < 1)) throw new RangeError(`minGain ${minGain} must be below 1`);
  const l = level(name, lvl);
  let dict = null;
  let dictId = null;
  if (options.dictionary != null) {
    if (name !== 'zstd') throw new RangeError(`dictionaries work with zstd, not ${name}`);
    dict = Buffer.from(options.dictionary);
    if (dict.length < 8 || dict.readUInt32LE(0) !== ZSTD_DICT_MAGIC) throw new RangeError('not a zstd dictionary');
    dictId = dict.readUInt32LE(4);
  }
  const hyll = v.length >= 4 && v.toString('latin1', 0, 4) === 'HYLL';
  if (v.length >= minSize && name !== 'none' && !readsAsNumber(v) && !hyll) {
    const h = headerBytes(CODECS[name], v.length, checksum ? crc32c(v) : null, dictId);
    const frame = Buffer.concat([h, compress(name, v, l, dict)]);
    if (minGain < 0 || frame.length <= Math.floor(v.length * (1 - minGain))) return frame;
  }
  if (!isFrame(v)) return v;
  return Buffer.concat([headerBytes(0, v.length, checksum ? crc32c(v) : null, null), v]);
}

module.exports = {
  decode, decodeAsync, encode, parseHeader, crc32c, readsAsNumber, redisDictionaries, isFrame,
  FrameError, CorruptFrame, TruncatedFrame, ChecksumMismatch, TooLarge, UnsupportedVersion,
  UnknownCodec, NotPortable, GoOnlyCodec, UnknownDictionary, MissingLibrary,
  CODECS, PORTABLE, GO_ONLY, DEFAULT_MAX_SIZE, MAGIC,
};
