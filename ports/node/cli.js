#!/usr/bin/env node
'use strict';
// squeeze-frames decode < stored > value
// squeeze-frames encode CODEC [LEVEL] [--frame] < value > stored
// --frame writes a frame whatever the value (no minimum size or gain), for
// tests; without it encode applies the write policy.
const sf = require('./index.js');

const argv = process.argv.slice(2);
const args = argv.filter((a) => a !== '--frame');
const input = require('node:fs').readFileSync(0);
try {
  let out;
  if (args[0] === 'decode' && args.length === 1) {
    out = sf.decode(input);
  } else if (args[0] === 'encode' && (args.length === 2 || args.length === 3)) {
    let lvl = args[2] ?? null;
    if (lvl !== null && /^-?\d+$/.test(lvl)) lvl = Number(lvl);
    const opts = argv.includes('--frame') ? { minSize: 0, minGain: -1 } : {};
    out = sf.encode(input, args[1], lvl, opts);
  } else {
    process.stderr.write('usage: squeeze-frames decode | encode CODEC [LEVEL] [--frame]  (stdin to stdout)\n');
    process.exit(2);
  }
  process.stdout.write(out);
} catch (e) {
  if (!(e instanceof sf.FrameError || e instanceof RangeError)) throw e;
  process.stderr.write(`${e.name}: ${e.message}\n`);
  process.exit(1);
}
