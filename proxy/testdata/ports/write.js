// Writes JSON documents straight to Redis with ioredis, each compressed by
// the squeeze-frames package, as a Node service without a proxy would:
// node write.js REDIS_URL PREFIX N. Prints each key and the document's
// SHA-256, one line each.
const path = require('path');
const crypto = require('crypto');
const Redis = require(path.join(__dirname, '../clients/node/node_modules/ioredis'));
const sf = require(path.join(__dirname, '../../../ports/node'));

async function main() {
  const [url, prefix, n] = process.argv.slice(2);
  const redis = new Redis(url);
  const codecs = ['zstd', 'lz4', 'snappy', 'brotli', 'gzip'];
  for (let i = 0; i < Number(n); i++) {
    const doc = Buffer.from(JSON.stringify({
      id: i, user: `user-${i}`, tags: Array.from({ length: 40 }, (_, j) => `tag-${(i * 7 + j) % 13}`),
      text: 'lorem ipsum dolor sit amet '.repeat(20 + i),
    }));
    const key = `${prefix}${i}`;
    await redis.set(key, sf.encode(doc, codecs[i % codecs.length]));
    console.log(key, crypto.createHash('sha256').update(doc).digest('hex'));
  }
  redis.disconnect();
}
main().catch((e) => { console.error(e); process.exit(1); });
