#!/usr/bin/env node
// The installed `memgate` command: runs the TypeScript CLI through tsx.
require('tsx/cjs');
require('../client/cli.ts');
