#!/usr/bin/env node
// The installed `memgate` command: runs the TypeScript CLI through tsx.
require('tsx/cjs');
const { main } = require('../client/cli.ts');
main(process.argv).then((code) => process.exit(code));
