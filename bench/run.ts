/**
 * `npm run bench [-- name ... --flag]`: runs each benchmark (bench/<name>.ts) in its own process, one
 * after another so they do not compete for the machine, and writes bench/results/<name>.json.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const dir = __dirname;
const all = readdirSync(dir)
  .filter((f) => f.endsWith('.ts') && !['run.ts', 'support.ts', 'retrievalMetrics.ts'].includes(f))
  .map((f) => f.replace(/\.ts$/, ''))
  .sort();
const names = process.argv.slice(2).filter((a) => !a.startsWith('-'));
/** Flags (`--lexical`) go to every benchmark run. */
const flags = process.argv.slice(2).filter((a) => a.startsWith('-'));
const unknown = names.filter((n) => !all.includes(n));
if (unknown.length) {
  console.error(`unknown benchmark(s): ${unknown.join(', ')}; available: ${all.join(', ')}`);
  process.exit(2);
}
mkdirSync(join(dir, 'results'), { recursive: true });
let failed = 0;
for (const name of names.length ? names : all) {
  console.error(`== bench/${name}`);
  const r = spawnSync(join(dir, '..', 'node_modules', '.bin', 'tsx'), [join(dir, `${name}.ts`), ...flags], {
    stdio: ['ignore', 'pipe', 'inherit'],
    encoding: 'utf8',
    maxBuffer: 64 << 20,
  });
  if (r.status !== 0) {
    failed++;
    console.error(`bench/${name} failed with exit code ${r.status}`);
    continue;
  }
  writeFileSync(join(dir, 'results', `${name}.json`), r.stdout);
  process.stdout.write(r.stdout);
}
process.exit(failed ? 1 : 0);
