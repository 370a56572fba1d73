// cluster.js is check.js for a Redis Cluster behind squeeze proxies: the
// cluster client of node-redis or ioredis, given one proxy's address, must
// find the other proxies (never the nodes) and read back every value it
// wrote, on keys spread over all slots. It prints the addresses the client
// ended up using, one per line, as "node HOST:PORT".
//
// Usage: node cluster.js node-redis|ioredis HOST:PORT KEY_PREFIX
'use strict';

const [lib, seed, prefix] = process.argv.slice(2);
if (!lib || !seed || !prefix) {
  console.error('usage: node cluster.js node-redis|ioredis HOST:PORT KEY_PREFIX');
  process.exit(2);
}
const [host, port] = [seed.slice(0, seed.lastIndexOf(':')), Number(seed.slice(seed.lastIndexOf(':') + 1))];

// doc is a JSON-like value of n bytes that compresses well.
const doc = (n, i) => JSON.stringify({ id: i, body: `squeeze cluster document ${i} `.repeat(Math.ceil(n / 30)) }).slice(0, n);

let failed = false;
function same(name, got, want) {
  if (got !== want) {
    console.error(`${name}: read back ${got === null ? 'nil' : got.length} bytes that differ from the ${want.length} written`);
    failed = true;
  }
}

async function main() {
  let c;
  let addresses;
  if (lib === 'ioredis') {
    const Redis = require('ioredis');
    c = new Redis.Cluster([{ host, port }], { redisOptions: { maxRetriesPerRequest: 2 } });
    addresses = () => c.nodes('all').map((n) => `${n.options.host}:${n.options.port}`);
  } else if (lib === 'node-redis') {
    const { createCluster } = require('redis');
    c = createCluster({ rootNodes: [{ url: `redis://${seed}` }] });
    c.on('error', (err) => { console.error(`cluster error: ${err.message}`); failed = true; });
    await c.connect();
    addresses = () => c.masters.map((n) => `${n.host}:${n.port}`);
  } else {
    throw new Error(`unknown library ${lib}`);
  }
  for (let i = 0; i < 30; i++) {
    await c.set(`${prefix}doc:${i}`, doc(3000 + 100 * i, i));
    if (lib === 'ioredis') await c.hset(`${prefix}h:${i}`, 'f', doc(1000, i));
    else await c.hSet(`${prefix}h:${i}`, 'f', doc(1000, i));
  }
  for (let i = 0; i < 30; i++) {
    same(`GET doc:${i}`, await c.get(`${prefix}doc:${i}`), doc(3000 + 100 * i, i));
    same(`HGET h:${i}`, lib === 'ioredis' ? await c.hget(`${prefix}h:${i}`, 'f') : await c.hGet(`${prefix}h:${i}`, 'f'), doc(1000, i));
  }
  if (lib === 'node-redis') {
    // Sharded pub/sub: the subscription goes to the proxy of the channel's
    // slot, and a large message arrives whole.
    const message = doc(20000, 7);
    const got = new Promise((resolve) => c.sSubscribe(`${prefix}chan`, resolve));
    await new Promise((res) => setTimeout(res, 200));
    await c.sPublish(`${prefix}chan`, message);
    const m = await Promise.race([got, new Promise((_, rej) => setTimeout(() => rej(new Error('no sharded message within 5 s')), 5000))]);
    same('SPUBLISH message', m, message);
  }
  for (const a of [...new Set(addresses())].sort()) console.log(`node ${a}`);
  await c.quit();
}

main().then(
  () => process.exit(failed ? 1 : 0),
  (err) => { console.error(err.stack || String(err)); process.exit(1); },
);
