#!/usr/bin/env node
'use strict';
// squeeze-frames decode [--files FILE...] < stored > value
// squeeze-frames encode CODEC [LEVEL] [--frame] [--dict FILE] [--files FILE...] < value > stored
// --frame writes a frame whatever the value (no minimum size or gain), for
// tests; without it encode applies the write policy. --dict compresses with
// a zstd dictionary. --files reads each
// FILE and writes FILE.out instead of using stdin and stdout.
const fs = require('node:fs');
const sf = require('./index.js');

let argv = process.argv.slice(2);
let files = [];
const at = argv.indexOf('--files');
if (at >= 0) [argv, files] = [argv.slice(0, at), argv.slice(at + 1)];
let dictionary = null;
const d = argv.indexOf('--dict');
if (d >= 0) {
  dictionary = fs.readFileSync(argv[d + 1]);
  argv = [...argv.slice(0, d), ...argv.slice(d + 2)];
}
const args = argv.filter((a) => a !== '--frame');
let run;
if (args[0] === 'decode' && args.length === 1) {
  run = (data) => sf.decode(data);
} else if (args[0] === 'encode' && (args.length === 2 || args.length === 3)) {
  let lvl = args[2] ?? null;
  if (lvl !== null && /^-?\d+$/.test(lvl)) lvl = Number(lvl);
  const opts = argv.includes('--frame') ? { minSize: 0, minGain: -1, dictionary } : { dictionary };
  run = (data) => sf.encode(data, args[1], lvl, opts);
} else {
  process.stderr.write('usage: squeeze-frames decode | encode CODEC [LEVEL] [--frame]  [--files FILE...]\n');
  process.exit(2);
}
try {
  if (files.length === 0) process.stdout.write(run(fs.readFileSync(0)));
  for (const f of files) fs.writeFileSync(f + '.out', run(fs.readFileSync(f)));
} catch (e) {
  if (!(e instanceof sf.FrameError || e instanceof RangeError)) throw e;
  process.stderr.write(`${e.name}: ${e.message}\n`);
  process.exit(1);
}
