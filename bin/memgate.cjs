#!/usr/bin/env node
// The installed `memgate` command. Runs the compiled CLI in dist/ (`npm run build`; `npm start`,
// `npm test` and `npm run bench` build it first) when that build is current, and otherwise the
// TypeScript sources through tsx: an edited source is never shadowed by stale JavaScript.
const { distIsCurrent, runCliFromSources } = require('../scripts/bootstrap.cjs');

if (distIsCurrent()) {
  require('../dist/cli/cli.js')
    .main(process.argv)
    .then((code) => process.exit(code));
} else {
  if (process.stderr.isTTY) {
    console.error(
      '[memgate] dist/ is missing or older than the sources: running them through tsx (`npm run build` starts faster)',
    );
  }
  runCliFromSources(process.argv.slice(2)).then((code) => process.exit(code));
}
