// check.js runs the same commands as a Node application would, with
// node-redis or ioredis, against the Redis (or squeeze proxy) at URL, and
// prints one JSON line per step: what the client library returned, with
// strings reduced to their length and SHA-256. It fails (exit 1) when a value
// read back differs from the value written.
//
// Usage: node check.js node-redis|node-redis-resp3|ioredis URL KEY_PREFIX
// (proxy/clients_test.go runs it against Redis and through the proxy and
// compares the two transcripts.)
'use strict';
const crypto = require('crypto');

const [lib, url, prefix] = process.argv.slice(2);
if (!lib || !url || !prefix) {
  console.error('usage: node check.js node-redis|node-redis-resp3|ioredis URL KEY_PREFIX');
  process.exit(2);
}

// doc is a JSON document of about n bytes, the same on every run.
function doc(n, seed) {
  const items = [];
  let size = 2;
  for (let i = 0; size < n; i++) {
    const s = JSON.stringify({ id: seed * 100000 + i, name: `user-${(i * 7919) % 1000}`, active: i % 3 === 0, tags: ['redis', 'json', `t${i % 17}`], score: (i * 31) % 997 });
    items.push(s);
    size += s.length + 1;
  }
  return '[' + items.join(',') + ']';
}

function digest(v) {
  if (v === null || v === undefined) return null;
  if (Buffer.isBuffer(v) || typeof v === 'string') {
    const b = Buffer.isBuffer(v) ? v : Buffer.from(v, 'utf8');
    return { len: b.length, sha256: crypto.createHash('sha256').update(b).digest('hex').slice(0, 16) };
  }
  if (Array.isArray(v)) return v.map(digest);
  if (v instanceof Map) return [...v.entries()].map(([k, x]) => [digest(k), digest(x)]);
  if (typeof v === 'object') return Object.keys(v).sort().map((k) => [k, digest(v[k])]);
  return v;
}

let failed = false;
function step(name, v) {
  console.log(JSON.stringify({ step: name, reply: digest(v) }));
}
function same(name, got, want) {
  const g = Buffer.isBuffer(got) ? got : Buffer.from(String(got), 'utf8');
  const w = Buffer.isBuffer(want) ? want : Buffer.from(String(want), 'utf8');
  if (!g.equals(w)) {
    console.error(`${name}: read back ${g.length} bytes that differ from the ${w.length} written`);
    failed = true;
  }
}

const big = doc(20000, 1);
const big2 = doc(48000, 2);
const binary = Buffer.alloc(25600);
for (let i = 0; i < binary.length; i++) binary[i] = i % 256;
const k = (s) => prefix + s;

// The two libraries name their calls differently; each gets a small
// adapter with the same methods.
async function open() {
  if (lib === 'ioredis') {
    const Redis = require('ioredis');
    const c = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0 });
    await c.connect();
    const sub = c.duplicate();
    return {
      call: (...args) => c.call(...args),
      callBuffer: (...args) => c.callBuffer(...args),
      set: (key, v) => c.set(key, v),
      get: (key) => c.get(key),
      getBuffer: (key) => c.getBuffer(key),
      hset: (key, obj) => c.hset(key, obj),
      hgetall: (key) => c.hgetall(key),
      hscanAll: (key) => new Promise((resolve, reject) => {
        const out = {};
        c.hscanStream(key, { count: 2 }).on('data', (kv) => { for (let i = 0; i < kv.length; i += 2) out[kv[i]] = kv[i + 1]; }).on('end', () => resolve(out)).on('error', reject);
      }),
      blpop: (key) => c.blpop(key, 5),
      rpush: (key, ...vs) => c.rpush(key, ...vs),
      lrange: (key, a, b) => c.lrange(key, a, b),
      multi: async (cmds) => (await cmds.reduce((m, [n, ...a]) => m.call(n, ...a), c.multi()).exec()).map(([err, r]) => (err ? `error: ${err.message}` : r)),
      pipeline: async (cmds) => (await cmds.reduce((p, [n, ...a]) => p.call(n, ...a), c.pipeline()).exec()).map(([err, r]) => (err ? `error: ${err.message}` : r)),
      subscribe: async (channel, onMessage) => {
        await sub.subscribe(channel);
        sub.on('message', (ch, msg) => onMessage(msg));
      },
      publish: (channel, msg) => c.publish(channel, msg),
      close: async () => { sub.disconnect(); await c.quit(); },
    };
  }
  const { createClient, RESP_TYPES } = require('redis');
  const opts = { url, socket: { reconnectStrategy: false } };
  if (lib === 'node-redis-resp3') opts.RESP = 3;
  else if (lib !== 'node-redis') throw new Error(`unknown library ${lib}`);
  const c = createClient(opts);
  c.on('error', (err) => { console.error(`client error: ${err.message}`); failed = true; });
  await c.connect();
  const sub = c.duplicate();
  await sub.connect();
  const buffers = c.withTypeMapping({ [RESP_TYPES.BLOB_STRING]: Buffer });
  return {
    call: (...args) => c.sendCommand(args.map(String)),
    callBuffer: (...args) => buffers.sendCommand(args.map((a) => (Buffer.isBuffer(a) ? a : String(a)))),
    set: (key, v) => c.set(key, v),
    get: (key) => c.get(key),
    getBuffer: (key) => buffers.get(key),
    hset: (key, obj) => c.hSet(key, obj),
    hgetall: (key) => c.hGetAll(key),
    hscanAll: async (key) => {
      const out = {};
      for await (const entries of c.hScanIterator(key, { COUNT: 2 })) for (const { field, value } of entries) out[field] = value;
      return out;
    },
    blpop: async (key) => { const r = await c.blPop(key, 5); return r && [r.key, r.element]; },
    rpush: (key, ...vs) => c.rPush(key, vs),
    lrange: (key, a, b) => c.lRange(key, a, b),
    multi: (cmds) => cmds.reduce((m, args) => m.addCommand(args.map(String)), c.multi()).exec(),
    pipeline: (cmds) => cmds.reduce((m, args) => m.addCommand(args.map(String)), c.multi()).execAsPipeline(),
    subscribe: (channel, onMessage) => sub.subscribe(channel, onMessage),
    publish: (channel, msg) => c.publish(channel, msg),
    close: async () => { await sub.quit(); await c.quit(); },
  };
}

async function main() {
  const r = await open();

  // Strings: a JSON document, read whole and in parts.
  step('SET doc', await r.set(k('doc'), big));
  const got = await r.get(k('doc'));
  same('GET doc', got, big);
  step('GET doc', got);
  step('STRLEN doc', await r.call('STRLEN', k('doc')));
  step('GETRANGE doc', await r.call('GETRANGE', k('doc'), '0', '40'));
  step('APPEND doc', await r.call('APPEND', k('doc'), ',"tail"'));
  same('GET doc after APPEND', await r.get(k('doc')), big + ',"tail"');
  step('SET doc GET', await r.call('SET', k('doc'), big2, 'GET'));
  step('GETEX doc', await r.call('GETEX', k('doc'), 'EX', '100'));
  step('TTL doc', await r.call('TTL', k('doc')));

  // Bytes that are not UTF-8.
  step('SET binary', await r.callBuffer('SET', k('binary'), binary));
  const gotBinary = await r.getBuffer(k('binary'));
  same('GET binary', gotBinary, binary);
  step('GET binary', gotBinary);

  // Hash field values, list elements and stream entries.
  step('HSET', await r.hset(k('h'), { big, small: 'v', n: '42' }));
  const h = await r.hgetall(k('h'));
  same('HGETALL big', h.big, big);
  step('HGETALL', h);
  step('HSTRLEN', await r.call('HSTRLEN', k('h'), 'big'));
  step('HINCRBY', await r.call('HINCRBY', k('h'), 'n', '8'));
  step('RPUSH', await r.rpush(k('l'), big, big2, 'x'));
  const l = await r.lrange(k('l'), 0, -1);
  same('LRANGE 1', l[1], big2);
  step('LRANGE', l);
  step('LPOP', await r.call('LPOP', k('l')));
  step('XADD', await r.call('XADD', k('s'), '1-1', 'body', big));
  step('XRANGE', await r.call('XRANGE', k('s'), '-', '+'));

  // The library's own helpers: a scan iterator over hash fields, a
  // blocking pop; and more commands that return values.
  await r.hset(k('h'), { big2 });
  const scanned = await r.hscanAll(k('h'));
  same('HSCAN big2', scanned.big2, big2);
  step('HSCAN', scanned);
  await r.rpush(k('q'), big2);
  const popped = await r.blpop(k('q'));
  same('BLPOP', popped && popped[1], big2);
  step('BLPOP', popped);
  step('LMOVE', await r.call('LMOVE', k('l'), k('l3'), 'LEFT', 'RIGHT'));
  step('MSET', await r.call('MSET', k('m1'), big, k('m2'), big2));
  step('MGET m', await r.call('MGET', k('m1'), k('m2'), k('none')));
  step('SETRANGE', await r.call('SETRANGE', k('m1'), '5', 'squeeze'));
  same('GET after SETRANGE', await r.get(k('m1')), big.slice(0, 5) + 'squeeze' + big.slice(12));
  step('GETRANGE -40 -1', await r.call('GETRANGE', k('m1'), '-40', '-1'));
  step('XGROUP', await r.call('XGROUP', 'CREATE', k('s'), 'g', '0'));
  step('XREADGROUP', await r.call('XREADGROUP', 'GROUP', 'g', 'c', 'COUNT', '10', 'STREAMS', k('s'), '>'));

  // A transaction and a pipeline.
  step('MULTI', await r.multi([['SET', k('t'), big], ['GET', k('t')], ['STRLEN', k('t')], ['INCR', k('counter')], ['GETDEL', k('t')]]));
  const cmds = [];
  for (let i = 0; i < 40; i++) cmds.push(['SET', k(`p:${i}`), doc(2000 + 500 * i, i)]);
  for (let i = 0; i < 40; i++) cmds.push(['GET', k(`p:${i}`)]);
  const replies = await r.pipeline(cmds);
  for (let i = 0; i < 40; i++) same(`pipeline GET p:${i}`, replies[40 + i], doc(2000 + 500 * i, i));
  step('pipeline', replies);
  const keys = [];
  for (let i = 0; i < 40; i++) keys.push(k(`p:${i}`));
  step('MGET', await r.call('MGET', ...keys));

  // Pub/sub: a message published through one connection reaches a
  // subscriber on another unchanged.
  const received = new Promise((resolve) => r.subscribe(k('chan'), resolve));
  await new Promise((res) => setTimeout(res, 100));
  step('PUBLISH', await r.publish(k('chan'), big));
  const msg = await Promise.race([received, new Promise((_, rej) => setTimeout(() => rej(new Error('no message within 5 s')), 5000))]);
  same('message', msg, big);
  step('message', msg);

  // ioredis's auto-pipelining: concurrent calls leave in one write.
  if (lib === 'ioredis') {
    const Redis = require('ioredis');
    const auto = new Redis(url, { enableAutoPipelining: true, maxRetriesPerRequest: 0 });
    const got = await Promise.all(keys.map((key) => auto.get(key)));
    for (let i = 0; i < 40; i++) same(`auto-pipelined GET p:${i}`, got[i], doc(2000 + 500 * i, i));
    step('auto-pipelined GETs', got);
    await auto.quit();
  }

  // RESP3 client-side caching (CLIENT TRACKING): a cached value is
  // invalidated when another connection changes it.
  if (lib === 'node-redis-resp3') {
    const { createClient } = require('redis');
    const cached = createClient({ url, RESP: 3, clientSideCache: { ttl: 0, maxEntries: 0 } });
    await cached.connect();
    same('cached GET', await cached.get(k('doc')), big2);
    same('cached GET again', await cached.get(k('doc')), big2);
    await r.set(k('doc'), big);
    let fresh = null;
    for (let i = 0; i < 50 && fresh !== big; i++) {
      await new Promise((res) => setTimeout(res, 20));
      fresh = await cached.get(k('doc'));
    }
    same('cached GET after SET elsewhere', fresh, big);
    const stats = cached.clientSideCache.stats();
    step('client-side cache hits', stats.hitCount > 0);
    await cached.quit();
  }

  // Errors come back as Redis words them.
  try {
    await r.call('INCR', k('doc'));
    step('INCR doc', 'no error');
  } catch (err) {
    step('INCR doc', `error: ${err.message}`);
  }
  await r.close();
}

main().then(
  () => process.exit(failed ? 1 : 0),
  (err) => { console.error(err.stack || String(err)); process.exit(1); },
);
