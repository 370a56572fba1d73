// A BullMQ queue driven as an application would, for scripts/study-scripts.sh
// (issue 22): everything BullMQ writes goes through its Lua scripts.
//
//   node study.js MODE PORT [N] [SIZE]
//
// MODE:
//   add        enqueue N jobs (default 200) whose data is a JSON document of
//              about SIZE bytes (default 35000), generated from the job's
//              number, so a reader can check it byte for byte
//   work       run a worker until N jobs completed or failed, or TIMEOUT_MS
//              (default 20000) passed; each job's data must equal the
//              document of its number (a mismatch fails the job), and the
//              worker writes one job.log line per job; counts the worker's
//              completed, failed, stalled and error events
//   counts     the queue's job counts (getJobCounts)
//   completed  read the completed jobs with queue.getCompleted (BullMQ's
//              getJobs script reads each job hash inside Lua) and check them
//   fromid     read jobs 1..N with Job.fromId (a plain HGETALL, no script)
//              and check them
//
// Every mode prints one JSON line; errors are counted and the first distinct
// messages quoted, so the shell script can report them.
'use strict';
const crypto = require('crypto');
const fs = require('fs');
const path = require('path');
const { Queue, Worker, Job } = require('bullmq');

const [mode, portArg, nArg, sizeArg] = process.argv.slice(2);
const port = Number(portArg);
const N = Number(nArg || 200);
const SIZE = Number(sizeArg || 35000);
const TIMEOUT_MS = Number(process.env.TIMEOUT_MS || 20000);
const QUEUE = process.env.QUEUE || 'study';
// LOCK_MS, when set, is the worker's lockDuration and stalledInterval
// (BullMQ's defaults: 30000), so a stalled job's fate shows within TIMEOUT_MS.
const LOCK_MS = Number(process.env.LOCK_MS || 0);
// LOG=0 keeps the worker from writing one job.log line per job (addLog).
const LOG = process.env.LOG !== '0';
if (!mode || !port) {
  console.error('usage: node study.js add|work|counts|completed|fromid PORT [N] [SIZE]');
  process.exit(2);
}
const connection = { host: '127.0.0.1', port, maxRetriesPerRequest: null };

// mulberry32: a small seeded PRNG, so documents are the same on every run.
function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const WORDS = ('order ship cancel refund warehouse parcel express standard priority ' +
  'customer invoice payment card transfer pending confirmed delivered returned ' +
  'north south east west central store online mobile partner coupon discount ' +
  'blue red green black white small medium large cotton leather steel glass').split(' ');

// doc(seq, size): an order export of about size bytes, as a job queue
// carries (repeated field names, ids, prices, short phrases).
function doc(seq, size) {
  const r = rng(seq * 2654435761);
  const pick = () => WORDS[Math.floor(r() * WORDS.length)];
  const d = {
    seq,
    kind: 'order-export',
    tenant: `tenant-${1 + Math.floor(r() * 50)}`,
    createdAt: new Date(Date.UTC(2026, 10, 1) + seq * 61000).toISOString(),
    orders: [],
  };
  let i = 0;
  while (JSON.stringify(d).length < size - 400) {
    const items = [];
    const k = 1 + Math.floor(r() * 4);
    for (let j = 0; j < k; j++) {
      items.push({
        sku: `SKU-${String(Math.floor(r() * 100000)).padStart(6, '0')}`,
        name: `${pick()} ${pick()} ${pick()}`,
        qty: 1 + Math.floor(r() * 5),
        price: Math.round(r() * 20000) / 100,
      });
    }
    d.orders.push({
      id: `${seq}-${i++}`,
      customer: { id: Math.floor(r() * 1e6), email: `user${Math.floor(r() * 1e5)}@example.com`, country: ['DE', 'FR', 'US', 'JP', 'BR'][Math.floor(r() * 5)] },
      status: pick(),
      channel: pick(),
      items,
      note: `${pick()} ${pick()} ${pick()} ${pick()} ${pick()}`,
    });
  }
  return d;
}

// scriptNames maps the SHA-1 of each of BullMQ's Lua scripts to its name,
// so that an error naming a script's SHA-1 also names the script.
let scriptNames;
function named(message) {
  if (!scriptNames) {
    scriptNames = new Map();
    const dir = path.join(path.dirname(require.resolve('bullmq')), 'scripts');
    for (const f of fs.readdirSync(dir).filter((f) => f.endsWith('.js') && f !== 'index.js')) {
      for (const v of Object.values(require(path.join(dir, f)))) {
        if (v && typeof v.content === 'string') scriptNames.set(crypto.createHash('sha1').update(v.content).digest('hex'), v.name);
      }
    }
  }
  return message.replace(/\b[0-9a-f]{40}\b/g, (sha) => (scriptNames.has(sha) ? `${sha} (${scriptNames.get(sha)})` : sha));
}

// errors keeps a count and the first distinct messages.
function errorLog() {
  const seen = new Map();
  return {
    add(e) {
      const m = named(String((e && e.message) || e));
      seen.set(m, (seen.get(m) || 0) + 1);
    },
    count() { let n = 0; for (const v of seen.values()) n += v; return n; },
    first(k = 3) { return [...seen.entries()].slice(0, k).map(([message, n]) => ({ message, n })); },
  };
}

function intact(job) {
  return job && job.data && JSON.stringify(job.data) === JSON.stringify(doc(job.data.seq, SIZE));
}

async function main() {
  const out = { mode, port, n: N };
  if (mode === 'add') {
    const q = new Queue(QUEUE, { connection });
    let bytes = 0;
    for (let i = 1; i <= N; i++) {
      const d = doc(i, SIZE);
      bytes += JSON.stringify(d).length;
      await q.add('export', d);
    }
    out.added = N;
    out.data_bytes = bytes;
    await q.close();
  } else if (mode === 'work') {
    const errs = errorLog();
    let completed = 0, failed = 0, checked = 0, wrong = 0, stalled = 0;
    const failedReasons = errorLog();
    let done;
    const finished = new Promise((res) => { done = res; });
    const w = new Worker(QUEUE, async (job) => {
      checked++;
      if (!intact(job)) {
        wrong++;
        throw new Error(`job ${job.id}: data differs from document ${job.data && job.data.seq}`);
      }
      if (LOG) await job.log(`exported ${job.data.orders.length} orders of ${job.data.tenant} (document ${job.data.seq}, ${JSON.stringify(job.data).length} bytes)`);
      return { seq: job.data.seq, orders: job.data.orders.length };
    }, Object.assign({ connection, concurrency: 4, drainDelay: 1 },
      LOCK_MS ? { lockDuration: LOCK_MS, stalledInterval: LOCK_MS } : {}));
    w.on('stalled', () => stalled++);
    w.on('completed', () => { if (++completed + failed >= N) done(); });
    w.on('failed', (job, e) => { failedReasons.add(e); if (completed + ++failed >= N) done(); });
    w.on('error', (e) => errs.add(e));
    const timer = setTimeout(() => { out.timed_out = true; done(); }, TIMEOUT_MS);
    const t0 = Date.now();
    await finished;
    clearTimeout(timer);
    out.seconds = (Date.now() - t0) / 1000;
    Object.assign(out, { completed, failed, stalled, processed: checked, data_mismatch: wrong });
    out.worker_errors = errs.count();
    out.first_worker_errors = errs.first();
    out.failed_reasons = failedReasons.first();
    await w.close(true);
  } else if (mode === 'counts') {
    const q = new Queue(QUEUE, { connection });
    try { out.counts = await q.getJobCounts(); } catch (e) { out.error = e.message; }
    await q.close();
  } else if (mode === 'completed' || mode === 'fromid') {
    const q = new Queue(QUEUE, { connection });
    try {
      let jobs;
      if (mode === 'completed') jobs = await q.getCompleted(0, -1);
      else {
        jobs = [];
        for (let i = 1; i <= N; i++) jobs.push(await Job.fromId(q, String(i)));
      }
      out.read = jobs.filter(Boolean).length;
      out.intact = jobs.filter(intact).length;
      out.with_returnvalue = jobs.filter((j) => j && j.returnvalue && j.returnvalue.seq === j.data.seq).length;
    } catch (e) {
      out.error = named(e.message);
    }
    await q.close();
  } else {
    console.error(`unknown mode ${mode}`);
    process.exit(2);
  }
  console.log(JSON.stringify(out));
}

main().then(() => process.exit(0), (e) => { console.log(JSON.stringify({ mode, port, error: e.message })); process.exit(1); });
