#!/usr/bin/env node
// Entry point of `npm start`, `npm test` and `npm run bench` on a fresh clone: installs the
// npm dependencies when they are missing or stale, then hands over to the TypeScript code,
// which obtains and starts the servers it needs. Plain CommonJS: it runs before node_modules exists.
const { spawnSync } = require('node:child_process');
const { existsSync, statSync } = require('node:fs');
const { join } = require('node:path');

const root = join(__dirname, '..');
const marker = join(root, 'node_modules', '.package-lock.json');
const lock = join(root, 'package-lock.json');

function run(cmd, args) {
  const r = spawnSync(cmd, args, { cwd: root, stdio: 'inherit' });
  if (r.error) throw r.error;
  return r.status ?? 1;
}

if (!existsSync(marker) || statSync(lock).mtimeMs > statSync(marker).mtimeMs) {
  console.log('[memgate] installing npm dependencies (npm ci)');
  const status = run('npm', ['ci', '--no-audit', '--no-fund']);
  if (status !== 0) process.exit(status);
}

// Ctrl-C reaches the child too; wait for it to shut down cleanly instead of dying first.
process.on('SIGINT', () => {});
process.on('SIGTERM', () => {});

const bin = (name) => join(root, 'node_modules', '.bin', name);
const [task, ...rest] = process.argv.slice(2);
const commands = {
  start: [bin('tsx'), ['client/cli.ts', 'start', ...rest]],
  test: [bin('vitest'), ['run', ...rest]],
  bench: [bin('tsx'), ['bench/run.ts', ...rest]],
};
if (!commands[task]) {
  console.error(`usage: bootstrap.cjs ${Object.keys(commands).join('|')}`);
  process.exit(2);
}
process.exit(run(...commands[task]));
