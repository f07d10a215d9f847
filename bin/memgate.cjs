#!/usr/bin/env node
// The installed `memgate` command. Runs the compiled CLI in dist/ (`npm run build`; `npm start`,
// `npm test` and `npm run bench` build it first) when that build is current, and otherwise the
// TypeScript sources through tsx: an edited source is never shadowed by stale JavaScript.
const { distIsCurrent } = require('../scripts/bootstrap.cjs');

let cli;
if (distIsCurrent()) {
  cli = require('../dist/client/cli.js');
} else {
  if (process.stderr.isTTY) {
    console.error(
      '[memgate] dist/ is missing or older than the sources: running them through tsx (`npm run build` starts faster)',
    );
  }
  require('tsx/cjs');
  cli = require('../client/cli.ts');
}
cli.main(process.argv).then((code) => process.exit(code));
