/**
 * `memgate export` of one agent as its store grows: `bin/memgate.cjs` in a process of its own
 * (the compiled build when `npm run build` left it current, as `npm run bench` does; `cli` says
 * which ran), writing the export to a file, and that process's peak resident set (`maxRSS` of
 * `process.resourceUsage()`, printed as it exits by a module preloaded into it). The export
 * reads the store a page at a time and writes each page before it reads the next, so its peak
 * should not grow with the agent. Sizes: BENCH_EXPORT_SIZES (default "10000,100000").
 *
 * The agent is loaded in bulk, as the nights before left it (three in four entries hot, the
 * rest cold), each entry a sentence of about 150 characters, as in bench/recall.
 *
 * Prints {"baseline","sizes":[{"entries","exportS","peakRssMb","heapAtExitMb","bytes"}],
 * "peakRssGrowthExponent"}: the baseline is the same command for an agent with nothing to
 * export (NotFound once it has loaded and connected), the exponent the log-log slope of the
 * peak between the smallest and largest size (0: flat, 1: it grows as the agent does).
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildEntry, memoryPolicy, type Entry } from '../core/entry';
import { DAY_MS } from '../core/salience';
import { registerAgent } from '../store/agents';
import { entryId } from '../core/ids';
import { settledEntry } from '../store/entries';
import { emit, growthExponent, round, startBenchEnv } from './support';

const SIZES = (process.env.BENCH_EXPORT_SIZES ?? '10000,100000').split(',').map(Number);
const BATCH = 1000;
const ROOT = join(__dirname, '..');
const SUBJECTS = ['supplier', 'invoice', 'deploy', 'customer', 'contract', 'budget', 'incident', 'roadmap'];

const { distIsCurrent } = createRequire(__filename)('../scripts/bootstrap.cjs') as {
  distIsCurrent(): boolean;
};

async function main() {
  // bin/memgate.cjs runs the compiled build when it is current, else the sources through tsx.
  const cli = distIsCurrent() ? 'compiled' : 'tsx';
  const env = await startBenchEnv();
  const scratch = mkdtempSync(join(tmpdir(), 'memgate-export-bench-'));
  // Loaded into the export's process before the CLI: its peak resident set and its heap, as it exits.
  const preload = join(scratch, 'peak-rss.cjs');
  writeFileSync(
    preload,
    "process.on('exit', () => process.stderr.write(`\\npeak-rss-kb ${process.resourceUsage().maxRSS} heap-kb ${process.memoryUsage().heapTotal >> 10}\\n`));\n",
  );

  /** One `memgate export` process: its time, peak and heap, and its exit code. */
  async function exportProcess(agent: string, out: string) {
    const started = performance.now();
    const { code, stderr } = await new Promise<{ code: number; stderr: string }>((done) =>
      execFile(
        process.execPath,
        ['--require', preload, join(ROOT, 'bin', 'memgate.cjs'), 'export', '--agent', agent, '--out', out],
        {
          env: {
            ...process.env,
            MEMGATE_DB: env.config.database,
            TEMPORAL_ADDRESS: env.endpoints.temporalAddress,
            MONGODB_URI: env.endpoints.mongoUri,
          },
        },
        (err, _stdout, stderr) => done({ code: err ? Number(err.code) : 0, stderr }),
      ),
    );
    const seconds = (performance.now() - started) / 1000;
    const figures = /peak-rss-kb (\d+) heap-kb (\d+)/.exec(stderr);
    if (!figures) throw new Error(`the export printed no peak resident set: ${stderr}`);
    return {
      code,
      stderr,
      seconds,
      peakRssMb: round(Number(figures[1]) / 1024, 1),
      heapAtExitMb: round(Number(figures[2]) / 1024, 1),
    };
  }
  const store = env.client.store;
  const policy = memoryPolicy(env.config);
  const agentId = `export-${env.runId}`;
  const now = Date.now();
  let loaded = 0;

  function entry(i: number): Entry {
    const text =
      `The ${SUBJECTS[i % SUBJECTS.length]} note ${i} about topic${(i * 7919) % 2500} says the figure is ` +
      `${(i * 104729) % 1000} units, reviewed by team ${i % 50} on the usual schedule.`;
    const input = {
      text,
      kind: 'episode' as const,
      salience: 0.05 + ((i * 37) % 95) / 100,
      source: { origin: 'agent' as const, sessionId: `session-${i % 200}` },
      confidence: 0.5,
      verified: false,
      volatile: false,
      writtenAt: now - 30 * DAY_MS + i * 10_000,
    };
    return settledEntry(
      buildEntry(entryId(agentId, { idempotencyKey: String(i) }), agentId, input, policy),
      now,
    );
  }

  async function loadTo(size: number) {
    while (loaded < size) {
      const entries = Array.from({ length: Math.min(BATCH, size - loaded) }, () => entry(loaded++));
      const cold = entries.filter((_, j) => j % 4 === 3).map((e) => ({ ...e, spilledAt: now }));
      await store.hot.insertMany(entries.filter((_, j) => j % 4 !== 3));
      await store.cold.insertMany(cold);
      await store.entryIds.insertMany(entries.map((e) => ({ _id: e._id, agentId })));
    }
  }

  const sizes = [];
  try {
    // What the command holds before it reads an entry: an agent with nothing to export
    // answers NotFound once the process has loaded and connected.
    const baseline = await exportProcess(`nobody-${env.runId}`, join(scratch, 'nothing.jsonl'));
    if (!baseline.stderr.includes('NotFound')) throw new Error(`expected NotFound: ${baseline.stderr}`);
    await registerAgent(store, agentId, now);
    for (const size of SIZES) {
      const t0 = performance.now();
      await loadTo(size);
      console.error(`[export] ${size} entries loaded in ${round((performance.now() - t0) / 1000, 1)} s`);
      const out = join(scratch, `export-${size}.jsonl`);
      const exported = await exportProcess(agentId, out);
      if (exported.code !== 0) throw new Error(`memgate export exited ${exported.code}: ${exported.stderr}`);
      sizes.push({
        entries: size,
        exportS: round(exported.seconds, 1),
        peakRssMb: exported.peakRssMb,
        heapAtExitMb: exported.heapAtExitMb,
        bytes: statSync(out).size,
      });
      rmSync(out);
      console.error(`[export] ${JSON.stringify(sizes.at(-1))}`);
    }
    emit({
      bench: 'export',
      server: env.config.mongoUri ? 'configured' : 'local stack (FerretDB 1.24 on PostgreSQL 16)',
      command: 'memgate export --agent <id> --out <file>, in a process of its own',
      cli,
      baseline: { peakRssMb: baseline.peakRssMb, heapAtExitMb: baseline.heapAtExitMb },
      sizes,
      peakRssGrowthExponent: growthExponent(sizes, (s) => s.peakRssMb),
    });
  } finally {
    rmSync(scratch, { recursive: true, force: true });
    await env.close();
  }
}

void main().catch((err) => {
  console.error(err);
  process.exit(1);
});
