#!/usr/bin/env node
// Entry point of `npm start`, `npm test` and `npm run bench` on a fresh clone: installs the
// npm dependencies when they are missing or stale, compiles the runtime code to dist/ when it
// is missing or older than its sources, then hands over to the code, which obtains and starts
// the servers it needs. Plain CommonJS: it runs before node_modules exists.
//
// It also exports `distIsCurrent`, the check bin/memgate.cjs makes before running dist/.
const { spawnSync } = require('node:child_process');
const { existsSync, readdirSync, readFileSync, statSync, utimesSync, writeFileSync } = require('node:fs');
const { join } = require('node:path');

const root = join(__dirname, '..');
const dist = join(root, 'dist');
// Written after each successful build, with the time the build started as its mtime.
const stamp = join(dist, '.stamp');
const buildConfig = join(root, 'tsconfig.build.json');

/** The newest mtime (ms) of the files under `dir` whose names end with one of `endings`, or 0. */
function newest(dir, endings = ['.ts']) {
  let latest = 0;
  let entries;
  try {
    entries = readdirSync(dir, { withFileTypes: true });
  } catch {
    return 0; // a folder that does not exist (yet) has no sources
  }
  for (const e of entries) {
    const path = join(dir, e.name);
    if (e.isDirectory()) latest = Math.max(latest, newest(path, endings));
    else if (endings.some((end) => e.name.endsWith(end))) latest = Math.max(latest, statSync(path).mtimeMs);
  }
  return latest;
}

/** The memory browser's sources (cli/ui.ts bundles them into dist/ui/). */
const UI_SOURCES = ['.ts', '.css', '.html'];

/**
 * Whether dist/ holds a complete build of the current sources: its stamp is at least as new
 * as every .ts file under the folders tsconfig.build.json compiles, every source of the
 * memory browser under ui/, and both tsconfig files. A build stamps the time it started, so
 * a file saved while it ran counts as newer. About a hundred stat calls: a few milliseconds.
 */
function distIsCurrent() {
  let built;
  try {
    built = statSync(stamp).mtimeMs;
    statSync(join(dist, 'cli', 'cli.js'));
    statSync(join(dist, 'ui', 'app.js'));
  } catch {
    return false;
  }
  const { include } = JSON.parse(readFileSync(buildConfig, 'utf8'));
  const sources = [statSync(buildConfig).mtimeMs, statSync(join(root, 'tsconfig.json')).mtimeMs];
  for (const dir of include) sources.push(newest(join(root, dir)));
  sources.push(newest(join(root, 'ui'), UI_SOURCES));
  return Math.max(...sources) <= built;
}

function run(cmd, args) {
  const r = spawnSync(cmd, args, { cwd: root, stdio: 'inherit' });
  if (r.error) throw r.error;
  return r.status ?? 1;
}

const bin = (name) => join(root, 'node_modules', '.bin', name);

/**
 * `tsc -p tsconfig.build.json` (incremental), then the memory browser's bundle into dist/ui/
 * (cli/ui.ts). On a type error, or a bundle that fails, the stamp is not written: the
 * code still runs, from its TypeScript sources (bin/memgate.cjs), never from a stale dist/.
 */
function build() {
  console.log('[memgate] compiling to dist/ (npm run build)');
  const started = Date.now();
  const bundleUi =
    "require('./dist/cli/ui.js').writeUi().catch((e) => { console.error(e); process.exit(1); })";
  if (run(bin('tsc'), ['-p', 'tsconfig.build.json']) !== 0 || run(process.execPath, ['-e', bundleUi]) !== 0) {
    console.error('[memgate] the build failed: memgate runs from its TypeScript sources (slower start)');
    return false;
  }
  writeFileSync(stamp, `${new Date(started).toISOString()}\n`);
  utimesSync(stamp, started / 1000, started / 1000);
  return true;
}

function main() {
  const marker = join(root, 'node_modules', '.package-lock.json');
  const lock = join(root, 'package-lock.json');
  if (!existsSync(marker) || statSync(lock).mtimeMs > statSync(marker).mtimeMs) {
    console.log('[memgate] installing npm dependencies (npm ci)');
    const status = run('npm', ['ci', '--no-audit', '--no-fund']);
    if (status !== 0) process.exit(status);
  }

  const [task, ...rest] = process.argv.slice(2);
  const commands = {
    start: [process.execPath, ['bin/memgate.cjs', 'start', ...rest]],
    test: [bin('vitest'), ['run', ...rest]],
    bench: [bin('tsx'), ['bench/run.ts', ...rest]],
    build: null,
  };
  if (!(task in commands)) {
    console.error(`usage: bootstrap.cjs ${Object.keys(commands).join('|')}`);
    process.exit(2);
  }
  // `npm run build` always compiles (incrementally); the others only when dist/ is not current.
  // The integration tests and the startup benchmark run bin/memgate.cjs, so they get dist/ too.
  if (task === 'build') process.exit(build() ? 0 : 1);
  if (!distIsCurrent()) build();

  // Ctrl-C reaches the child too; wait for it to shut down cleanly instead of dying first.
  process.on('SIGINT', () => {});
  process.on('SIGTERM', () => {});
  process.exit(run(...commands[task]));
}

/**
 * The CLI from its TypeScript sources, in a child process started with `--import tsx`: tsx's
 * hooks for `require` alone (`tsx/cjs`) leave the CLI's lazy `import()`s of its heaviest
 * modules (the worker) to Node's own resolver, which does not find a `.ts` file. Signals go to
 * the child, which shuts down cleanly; resolves with its exit code.
 */
function runCliFromSources(args) {
  const { spawn } = require('node:child_process');
  const { pathToFileURL } = require('node:url');
  const cli = join(root, 'cli', 'cli.ts');
  // By path: the command may run from any directory.
  const tsx = pathToFileURL(require.resolve('tsx', { paths: [root] })).href;
  // The child holds an IPC channel to this process and stops as on SIGTERM when it closes: a
  // SIGKILL here, which cannot be forwarded, would otherwise leave it running unowned (a
  // worker polling, a server holding its port).
  const code = `process.channel.unref(); process.on('disconnect', () => process.kill(process.pid, 'SIGTERM')); require(${JSON.stringify(cli)}).main([process.argv[0], 'memgate', ...process.argv.slice(1)]).then((c) => process.exit(c))`;
  const child = spawn(process.execPath, ['--import', tsx, '-e', code, '--', ...args], {
    stdio: ['inherit', 'inherit', 'inherit', 'ipc'],
  });
  for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, () => child.kill(signal));
  return new Promise((resolve) => child.on('exit', (status, signal) => resolve(status ?? (signal ? 1 : 0))));
}

module.exports = { distIsCurrent, runCliFromSources };
if (require.main === module) main();
