/**
 * How long a `memgate` command takes to start: `node bin/memgate.cjs` running the compiled
 * build in dist/, beside the same command through tsx on the TypeScript sources (what
 * bin/memgate.cjs did before there was a build, and still does when dist/ is stale). Two
 * commands, each BENCH_CLI_RUNS times (default 10) per mode, the modes taking turns:
 * `--help`, and `recall` against a stack that is not running, which loads everything a recall
 * loads and parses its options, then fails fast with StackUnavailable. No server is needed, and
 * a running stack is not used: the command looks for one on ports where nothing listens.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { freePort } from '../stack/stack';
import { emit, percentile, round } from './support';

const RUNS = Number(process.env.BENCH_CLI_RUNS ?? 10);
const ROOT = join(__dirname, '..');
const BIN = join(ROOT, 'bin', 'memgate.cjs');

const { distIsCurrent } = createRequire(__filename)('../scripts/bootstrap.cjs') as {
  distIsCurrent(): boolean;
};

const COMMANDS = {
  help: { args: ['--help'], exit: 0, stderr: '' },
  recall: {
    args: ['recall', '--agent', 'a1', 'supplier notice period'],
    exit: 1,
    stderr: 'StackUnavailable',
  },
} as const;
type Name = keyof typeof COMMANDS;

function median(ms: number[]): number {
  return round(
    percentile(
      [...ms].sort((a, b) => a - b),
      50,
    ),
    0,
  );
}

async function main(): Promise<void> {
  if (!distIsCurrent()) {
    throw new Error('dist/ is missing or stale: `npm run build` first (`npm run bench` does)');
  }
  const scratch = mkdtempSync(join(tmpdir(), 'memgate-cli-startup-'));
  try {
    // The tsx mode: the CLI's sources through tsx, as bin/memgate.cjs runs them (`--import tsx`,
    // which covers `import()` too: the CLI loads each command's modules so).
    const viaTsx = join(scratch, 'memgate-tsx.cjs');
    writeFileSync(
      viaTsx,
      `require(${JSON.stringify(join(ROOT, 'cli', 'cli.ts'))}).main(process.argv).then((code) => process.exit(code));\n`,
    );
    const tsxLoader = pathToFileURL(require.resolve('tsx')).href;
    const modes = { tsx: ['--import', tsxLoader, viaTsx], compiled: [BIN] };
    // An empty state directory, no configured servers, and the local stack's ports where nothing
    // listens: recall finds no stack, at once, even beside a running one.
    const env: Record<string, string | undefined> = {
      ...process.env,
      MEMGATE_STATE_DIR: join(scratch, 'state'),
      MEMGATE_TEMPORAL_PORT: String(await freePort()),
      MEMGATE_MONGO_PORT: String(await freePort()),
      MEMGATE_EMBEDDINGS_PORT: String(await freePort()),
      MEMGATE_EMBEDDINGS_QUERY_SERVERS: '1',
      MEMGATE_EMBEDDINGS_PASSAGES_PORT: String(await freePort()),
    };
    delete env.TEMPORAL_ADDRESS;
    delete env.MONGODB_URI;

    const time = (script: string[], name: Name): number => {
      const c = COMMANDS[name];
      const t0 = process.hrtime.bigint();
      const r = spawnSync(process.execPath, [...script, ...c.args], { cwd: ROOT, env, encoding: 'utf8' });
      const ms = Number(process.hrtime.bigint() - t0) / 1e6;
      if (r.status !== c.exit || !r.stderr.includes(c.stderr)) {
        throw new Error(`${script.join(' ')} ${c.args.join(' ')} exited ${r.status}: ${r.stderr}`);
      }
      return ms;
    };

    const samples = {
      tsx: { help: [] as number[], recall: [] as number[] },
      compiled: { help: [] as number[], recall: [] as number[] },
    };
    for (const name of Object.keys(COMMANDS) as Name[]) {
      for (const mode of ['tsx', 'compiled'] as const) time(modes[mode], name); // warm the file cache
      for (let i = 0; i < RUNS; i++) {
        for (const mode of ['tsx', 'compiled'] as const) samples[mode][name].push(time(modes[mode], name));
      }
      console.error(`[cli-startup] ${name}: ${RUNS} runs per mode`);
    }

    const check: number[] = [];
    for (let i = 0; i < RUNS; i++) {
      const t0 = process.hrtime.bigint();
      distIsCurrent();
      check.push(Number(process.hrtime.bigint() - t0) / 1e6);
    }

    const medians = (mode: 'tsx' | 'compiled') => ({
      help: median(samples[mode].help),
      recall: median(samples[mode].recall),
    });
    const tsx = medians('tsx');
    const compiled = medians('compiled');
    emit({
      bench: 'cli-startup',
      runs: RUNS,
      node: process.version,
      commands: Object.fromEntries(
        Object.entries(COMMANDS).map(([k, c]) => [
          k,
          `memgate ${c.args.map((a) => (a.includes(' ') ? `'${a}'` : a)).join(' ')}`,
        ]),
      ),
      tsx_ms: tsx,
      compiled_ms: compiled,
      speedup: { help: round(tsx.help / compiled.help, 2), recall: round(tsx.recall / compiled.recall, 2) },
      // bin/memgate.cjs's is-dist-current check, part of every compiled run above.
      staleness_check_ms: round(
        percentile(
          [...check].sort((a, b) => a - b),
          50,
        ),
        1,
      ),
    });
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
