/**
 * Nearest-neighbour engines that could replace the home-made IVF index (core/vectorIndex.ts),
 * side by side on the same data in one run: usearch (HNSW, int8 and float16), hnswlib-node
 * (HNSW, float32), LanceDB (IVF-HNSW with 8-bit scalar quantisation, on disk) and the
 * home-made index as the baseline. The HNSW engines share one graph shape (M = 16,
 * efConstruction = 128, ef = 64: usearch's defaults).
 *
 * Per engine: recall@10 against exact cosine search, search latency for k = 10 with and
 * without a filter that admits half the ids, memory per vector, build time, save, and the time
 * a fresh process takes from opening the saved index to its first answer (usearch: `load`
 * and the memory-mapped `view`), and the longest synchronous step each phase holds the event
 * loop for: `maxBlockMs`, the longest single engine call, and `loopDelayMaxMs`, the event
 * loop's longest delay (`monitorEventLoopDelay`: it also counts garbage collection, the glue
 * around the calls and waiting for a busy core). Builds yield to the event loop between calls
 * (per-vector APIs every 10 ms, usearch every `BENCH_ENGINES_BATCH` vectors), as a service
 * would. Each phase runs in a process of its own, so memory is measured as that process's
 * growth (`settledMemory`) over what the data itself takes; the home-made index also reports
 * its own count.
 * A last check per engine: whether a vector erased with the engine's remove call is still in
 * the bytes it persists.
 *
 * Data: synthetic, shaped like text embeddings (bench/syntheticVectors.ts).
 *
 * Engines other than usearch (a dependency of the project) are installed on first run, at
 * pinned versions, into the cache directory (MEMGATE_CACHE_DIR, under bench-engines/); one
 * that cannot be installed or loaded is reported with its error.
 *
 * Env: BENCH_ENGINES_N vectors (default 100000), BENCH_ENGINES_QUERIES (default 200),
 * BENCH_ENGINES_BATCH vectors per usearch add call (default 64), BENCH_ENGINES_ONLY a
 * comma-separated subset of the engines. Prints {"n","dimensions","engines":{name:{...}}}.
 */
import { spawn, spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { setTimeout as sleep, setImmediate as yieldToLoop } from 'node:timers/promises';
import { Index, MetricKind, ScalarKind } from 'usearch';
import { dependencies } from '../package.json';
import { parseConfig } from '../core/config';
import { seededRandom } from '../core/seededRandom';
import { expandHome } from '../stack/stack';
import { emit, percentile, round } from './support';
import { SYNTHETIC_DATA, textLikeVectors } from './syntheticVectors';

const N = Number(process.env.BENCH_ENGINES_N ?? 100_000);
const QUERIES = Number(process.env.BENCH_ENGINES_QUERIES ?? 200);
/** 64 vectors take usearch about 25 ms on two cores at 100,000; larger batches block longer. */
const USEARCH_BATCH = Number(process.env.BENCH_ENGINES_BATCH ?? 64);
const DIMENSIONS = 384;
const K = 10;
const HNSW = { m: 16, efConstruction: 128, ef: 64 };
/** Searches before the measured ones, so that neither lazy loading nor a cold cache is timed. */
const WARMUP_QUERIES = 20;
/** A per-vector build yields to the event loop once it has held it this long. */
const YIELD_MS = 10;

const SEED = 0x76656e67;
/** The filtered searches admit the ids marked allowed: about this fraction of them. */
const ALLOWED_FRACTION = 0.5;

/** The erasure check's small index: this many data vectors and one marker vector. */
const ERASURE_N = 1000;

const LANCEDB_VERSION = '0.31.0';
/** The newest apache-arrow LanceDB 0.31.0 accepts as its peer. */
const ARROW_VERSION = '18.1.0';
const HNSWLIB_VERSION = '3.0.0';

const ENGINES = ['usearch', 'usearchF16', 'hnswlib', 'lancedb'] as const;
type EngineName = (typeof ENGINES)[number];
type Phase = 'build' | 'open' | 'view';

/** What a phase's process gets: which engine, and where the data and the saved index are. */
interface Job {
  engine: EngineName;
  phase: Phase;
  dataDir: string;
  indexDir: string;
}

interface Data {
  n: number;
  vectors: Float32Array;
  queries: Float32Array;
  /** 1 where the filtered searches admit the id. */
  allowed: Uint8Array;
}

/** Results of the measured searches: ids per query and each one's time. */
interface Runs {
  ids: number[][];
  ms: number[];
}

/** A phase's longest synchronous step: its longest engine call, and the event loop's longest delay. */
interface Blocking {
  callMs: number;
  loopMs: number;
}

interface SearchReport {
  plain: Runs;
  filtered: Runs;
  blocking: Blocking;
}

interface BuildReport {
  buildMs: number;
  buildBlocking: Blocking;
  memoryBytes: number;
  engineBytes: number | null;
  saveMs: number | null;
  saveBlocking: Blocking | null;
  fileBytes: number | null;
  search: SearchReport;
  erasure: Erasure | null;
}

interface OpenReport {
  /** From the open call until the first search has answered. */
  openMs: number;
  openBlocking: Blocking;
  memoryBytes: number;
  search: SearchReport;
}

/** Whether the marker vector's bytes are in what the engine persisted, at each step. */
type Erasure = Record<string, boolean | string>;

/** An index ready to search, as built or as reopened. */
interface Searchable {
  search(query: Float32Array, k: number): number[] | Promise<number[]>;
  filtered(query: Float32Array, k: number): number[] | Promise<number[]>;
  /** Persist into `dir`; absent where the build already did. */
  save?(dir: string): unknown;
  /** The engine's own count of the bytes it holds, where it has one. */
  bytes?(): number;
}

interface Engine {
  version: string;
  index: string;
  filter: string;
  blocking: string;
  build(data: Data, dir: string, clock: Clock): Promise<Searchable>;
  open(data: Data, dir: string, phase: Phase, clock: Clock): Promise<Searchable>;
  erasure?(data: Data, dir: string): Promise<Erasure>;
}

/**
 * The longest synchronous step of a phase: each engine call is timed (for an async call, the
 * part before it returns its promise), and the event loop's delay is sampled meanwhile, which
 * also sees the promises' continuations, garbage collection and the process waiting for a core.
 */
class Clock {
  private longestCallMs = 0;
  private readonly delay = monitorEventLoopDelay({ resolution: 1 });

  /** A running clock. */
  static async start(): Promise<Clock> {
    const clock = new Clock();
    clock.delay.enable();
    await clock.settle();
    return clock;
  }

  call<T>(fn: () => T): T {
    const start = performance.now();
    try {
      return fn();
    } finally {
      this.longestCallMs = Math.max(this.longestCallMs, performance.now() - start);
    }
  }

  /** The longest steps so far; starts the next phase's count afresh. */
  async lap(): Promise<Blocking> {
    await this.settle();
    const blocking = { callMs: round(this.longestCallMs), loopMs: round(this.delay.max / 1e6) };
    this.longestCallMs = 0;
    this.delay.reset();
    await this.settle();
    return blocking;
  }

  /**
   * Lets the delay monitor's timer fire: it measures each delay from its previous firing, so
   * a step is seen only once the timer has fired both before it (after `enable` or `reset`,
   * it has not) and after it.
   */
  private async settle(): Promise<void> {
    await sleep(2);
  }
}

/** Calls `add(i)` for every vector, yielding to the event loop whenever it has held it YIELD_MS. */
async function eachVector(n: number, add: (i: number) => void): Promise<void> {
  let since = performance.now();
  for (let i = 0; i < n; i++) {
    add(i);
    if (performance.now() - since > YIELD_MS) {
      await yieldToLoop();
      since = performance.now();
    }
  }
}

const row = (vectors: Float32Array, i: number) => vectors.subarray(i * DIMENSIONS, (i + 1) * DIMENSIONS);

function usearchConfig(quantization: ScalarKind) {
  return {
    dimensions: DIMENSIONS,
    metric: MetricKind.Cos,
    quantization,
    connectivity: HNSW.m,
    expansion_add: HNSW.efConstruction,
    expansion_search: HNSW.ef,
    multi: false,
  };
}

function usearchSearchable(index: Index, allowed: Uint8Array): Searchable {
  const search = (query: Float32Array, k: number) => Array.from(index.search(query, k, 1).keys, Number);
  return {
    search,
    // The binding has no filter: over-fetch by the filter's selectivity twice over, keep the
    // allowed, and fetch twice as many again while fewer than k pass.
    filtered(query, k) {
      for (let wanted = Math.ceil((2 * k) / ALLOWED_FRACTION); ; wanted *= 2) {
        const kept = search(query, Math.min(wanted, index.size())).filter((id) => allowed[id] === 1);
        if (kept.length >= k || wanted >= index.size()) return kept.slice(0, k);
      }
    },
    save: (dir) => index.save(join(dir, 'index.usearch')),
  };
}

function usearchEngine(quantization: ScalarKind): Engine {
  return {
    version: dependencies.usearch,
    index: `HNSW M=${HNSW.m} efConstruction=${HNSW.efConstruction} ef=${HNSW.ef}, ${quantization}`,
    filter:
      'none in the JS binding (the C++ core has a predicate search, not exposed): over-fetch 4k and keep the allowed, doubling while fewer than k pass; flags live in a typed array by key',
    blocking:
      'every call is synchronous (no async variants); add and multi-query search spread over `threads` (0 = all cores) but the calling thread waits for them; load reads the whole file inside one call; view maps it',
    async build(data, _dir, clock) {
      const index = new Index(usearchConfig(quantization));
      for (let start = 0; start < data.n; start += USEARCH_BATCH) {
        const end = Math.min(data.n, start + USEARCH_BATCH);
        const keys = BigUint64Array.from({ length: end - start }, (_, i) => BigInt(start + i));
        clock.call(() => index.add(keys, data.vectors.subarray(start * DIMENSIONS, end * DIMENSIONS), 0));
        await yieldToLoop();
      }
      return usearchSearchable(index, data.allowed);
    },
    async open(data, dir, phase, clock) {
      const index = new Index(usearchConfig(quantization));
      const file = join(dir, 'index.usearch');
      clock.call(() => (phase === 'view' ? index.view(file) : index.load(file)));
      return usearchSearchable(index, data.allowed);
    },
    async erasure(data, dir) {
      // Float32 storage, so the marker's stored bytes are its own and can be looked for.
      const index = new Index(usearchConfig(ScalarKind.F32));
      index.add(
        BigUint64Array.from({ length: ERASURE_N }, (_, i) => BigInt(i)),
        data.vectors.subarray(0, ERASURE_N * DIMENSIONS),
        0,
      );
      index.add(BigInt(ERASURE_N), MARKER, 0);
      const saved = (name: string) => {
        const file = join(dir, name);
        index.save(file);
        return containsMarker(file);
      };
      const control = saved('with-marker.usearch');
      index.remove(BigInt(ERASURE_N));
      const afterRemoveAndSave = saved('removed.usearch');
      index.add(BigInt(ERASURE_N + 1), row(data.vectors, 0), 0);
      return {
        control,
        afterRemoveAndSave,
        afterNextAddAndSave: saved('next-add.usearch'),
        note: 'remove marks the slot free and leaves its vector; save writes every slot; the next add takes the freed slot. The JS binding has no compact()',
      };
    },
  };
}

interface Hnsw {
  initIndex(opts: {
    maxElements: number;
    m: number;
    efConstruction: number;
    randomSeed: number;
    allowReplaceDeleted: boolean;
  }): void;
  addPoint(point: number[], label: number, replaceDeleted?: boolean): void;
  markDelete(label: number): void;
  setEf(ef: number): void;
  searchKnn(query: number[], k: number, filter?: (label: number) => boolean): { neighbors: number[] };
  writeIndex(file: string): Promise<boolean>;
  readIndex(file: string, allowReplaceDeleted?: boolean): Promise<boolean>;
}

interface Hnswlib {
  HierarchicalNSW: new (space: 'cosine', dimensions: number) => Hnsw;
}

function hnswlibEngine(lib: Hnswlib): Engine {
  const searchable = (index: Hnsw, allowed: Uint8Array): Searchable => {
    index.setEf(HNSW.ef);
    return {
      search: (query, k) => index.searchKnn(Array.from(query), k).neighbors,
      filtered: (query, k) =>
        index.searchKnn(Array.from(query), k, (label) => allowed[label] === 1).neighbors,
      save: (dir) => index.writeIndex(join(dir, 'index.hnsw')),
    };
  };
  const create = (maxElements: number) => {
    const index = new lib.HierarchicalNSW('cosine', DIMENSIONS);
    index.initIndex({
      maxElements,
      m: HNSW.m,
      efConstruction: HNSW.efConstruction,
      randomSeed: SEED,
      allowReplaceDeleted: true,
    });
    return index;
  };
  return {
    version: HNSWLIB_VERSION,
    index: `HNSW M=${HNSW.m} efConstruction=${HNSW.efConstruction} ef=${HNSW.ef}, f32`,
    filter:
      '`searchKnn(query, k, filter)`: a JS callback asked about each candidate label during the graph search',
    blocking:
      'addPoint (one vector, one thread, a JS array), searchKnn, markDelete and resizeIndex are synchronous; readIndex and writeIndex run on the libuv pool (Promise), with *Sync variants',
    async build(data, _dir, clock) {
      const index = create(data.n);
      await eachVector(data.n, (i) => {
        const point = Array.from(row(data.vectors, i));
        clock.call(() => index.addPoint(point, i));
      });
      return searchable(index, data.allowed);
    },
    async open(data, dir, _phase, clock) {
      const index = new lib.HierarchicalNSW('cosine', DIMENSIONS);
      await clock.call(() => index.readIndex(join(dir, 'index.hnsw'), true));
      return searchable(index, data.allowed);
    },
    async erasure(data, dir) {
      const index = create(ERASURE_N + 1);
      for (let i = 0; i < ERASURE_N; i++) index.addPoint(Array.from(row(data.vectors, i)), i);
      index.addPoint(Array.from(MARKER), ERASURE_N);
      const saved = async (name: string) => {
        await index.writeIndex(join(dir, name));
        return containsMarker(join(dir, name));
      };
      const control = await saved('with-marker.hnsw');
      index.markDelete(ERASURE_N);
      const afterRemoveAndSave = await saved('removed.hnsw');
      index.addPoint(Array.from(row(data.vectors, 0)), ERASURE_N + 1, true);
      return {
        control,
        afterRemoveAndSave,
        afterReplacingAddAndSave: await saved('replaced.hnsw'),
        note: 'markDelete only flags the element; addPoint(…, replaceDeleted = true) writes over a flagged one',
      };
    },
  };
}

interface LanceQuery {
  distanceType(type: 'cosine'): LanceQuery;
  ef(ef: number): LanceQuery;
  where(predicate: string): LanceQuery;
  limit(k: number): LanceQuery;
  select(columns: string[]): LanceQuery;
  toArrow(): Promise<{ getChild(name: string): { toArray(): Int32Array } | null }>;
}

interface LanceTable {
  createIndex(column: string, options: { config: unknown }): Promise<void>;
  vectorSearch(vector: Float32Array): LanceQuery;
  delete(predicate: string): Promise<unknown>;
  optimize(options: { cleanupOlderThan: Date; deleteUnverified: boolean }): Promise<unknown>;
}

interface Lance {
  connect(uri: string): Promise<{
    createTable(name: string, data: unknown): Promise<LanceTable>;
    openTable(name: string): Promise<LanceTable>;
  }>;
  Index: { hnswSq(options: Record<string, unknown>): unknown };
}

/** The parts of apache-arrow that build a table around the vectors' buffer without copying it. */
interface Arrow {
  makeData(props: Record<string, unknown>): unknown;
  makeVector(data: unknown): unknown;
  Table: new (columns: Record<string, unknown>) => unknown;
  FixedSizeList: new (size: number, child: unknown) => unknown;
  Field: new (name: string, type: unknown, nullable: boolean) => unknown;
  Float32: new () => unknown;
}

function lancedbEngine(lance: Lance, arrow: Arrow): Engine {
  const table = (n: number, vectors: Float32Array, allowed: Uint8Array) => {
    const item = new arrow.Field('item', new arrow.Float32(), true);
    const values = arrow.makeData({ type: new arrow.Float32(), length: n * DIMENSIONS, data: vectors });
    const list = arrow.makeData({
      type: new arrow.FixedSizeList(DIMENSIONS, item),
      length: n,
      nullCount: 0,
      child: values,
    });
    return new arrow.Table({
      id: arrow.makeVector(Int32Array.from({ length: n }, (_, i) => i)),
      allowed: arrow.makeVector(allowed.subarray(0, n)),
      vector: arrow.makeVector(list),
    });
  };
  const searchable = (t: LanceTable): Searchable => {
    const ids = async (query: LanceQuery, k: number) => {
      const result = await query
        .distanceType('cosine')
        .ef(HNSW.ef)
        .limit(k)
        .select(['id', '_distance'])
        .toArrow();
      return Array.from(result.getChild('id')?.toArray() ?? []);
    };
    return {
      search: (query, k) => ids(t.vectorSearch(query), k),
      filtered: (query, k) => ids(t.vectorSearch(query).where('allowed = 1'), k),
    };
  };
  return {
    version: LANCEDB_VERSION,
    index: `IVF-HNSW-SQ, 1 partition, m=${HNSW.m} efConstruction=${HNSW.efConstruction} ef=${HNSW.ef}, 8-bit scalar quantisation`,
    filter:
      "`.where('allowed = 1')`: SQL over the table's columns, applied before the vector search (prefilter; `.postfilter()` for after)",
    blocking:
      'every call is async, run on its own thread pool; the JS side serialises the Arrow data it is given (createTable, add) synchronously',
    async build(data, dir, clock) {
      const db = await lance.connect(dir);
      const arrowTable = table(data.n, data.vectors, data.allowed);
      const t = await clock.call(() => db.createTable('vectors', arrowTable));
      const config = lance.Index.hnswSq({
        distanceType: 'cosine',
        numPartitions: 1,
        m: HNSW.m,
        efConstruction: HNSW.efConstruction,
      });
      await clock.call(() => t.createIndex('vector', { config }));
      return searchable(t);
    },
    async open(_data, dir, _phase, clock) {
      const db = await clock.call(() => lance.connect(dir));
      return searchable(await clock.call(() => db.openTable('vectors')));
    },
    async erasure(data, dir) {
      const vectors = new Float32Array((ERASURE_N + 1) * DIMENSIONS);
      vectors.set(data.vectors.subarray(0, ERASURE_N * DIMENSIONS));
      vectors.set(MARKER, ERASURE_N * DIMENSIONS);
      const db = await lance.connect(dir);
      const t = await db.createTable('erasure', table(ERASURE_N + 1, vectors, new Uint8Array(ERASURE_N + 1)));
      const control = containsMarker(dir);
      await t.delete(`id = ${ERASURE_N}`);
      const afterRemoveAndSave = containsMarker(dir);
      const optimize = () => t.optimize({ cleanupOlderThan: new Date(), deleteUnverified: true });
      await optimize();
      const afterOptimize = containsMarker(dir);
      await t.delete(`id < ${ERASURE_N / 4}`);
      await optimize();
      return {
        control,
        afterRemoveAndSave,
        afterOptimize,
        afterQuarterDeletedAndOptimize: containsMarker(dir),
        note: 'delete writes a deletion file; optimize (compaction, then dropping old versions) rewrites only fragments that have enough deleted rows',
      };
    },
  };
}

/**
 * The erasure check's vector: ±1/16 on 256 dimensions, zero on the rest: unit length exactly,
 * so no engine's normalisation changes its bytes.
 */
const MARKER = (() => {
  const random = seededRandom(SEED + 1);
  return Float32Array.from({ length: DIMENSIONS }, (_, i) =>
    i % 3 === 2 ? 0 : random() < 0.5 ? -1 / 16 : 1 / 16,
  );
})();

/** Whether the marker's bytes are in a file, or in any file under a directory. */
function containsMarker(path: string): boolean {
  if (statSync(path).isDirectory()) return readdirSync(path).some((name) => containsMarker(join(path, name)));
  return readFileSync(path).indexOf(Buffer.from(MARKER.buffer, MARKER.byteOffset, MARKER.byteLength)) >= 0;
}

function bytesUnder(path: string): number {
  const stat = statSync(path);
  if (!stat.isDirectory()) return stat.size;
  return readdirSync(path).reduce((sum, name) => sum + bytesUnder(join(path, name)), 0);
}

/**
 * An engine from the benchmark's own install: installed with npm into the cache on first use
 * (the project does not depend on it), or the reason it could not be.
 */
function installed(dir: string, packages: string[], load: (req: NodeJS.Require) => Engine): Engine | string {
  const req = createRequire(join(dir, 'node_modules', 'noop.js'));
  try {
    return load(req);
  } catch {
    mkdirSync(dir, { recursive: true });
    const args = ['install', '--prefix', dir, '--no-save', '--no-audit', '--no-fund', '--omit=optional'];
    console.error(`[vector-engines] npm ${[...args, ...packages].join(' ')}`);
    const npm = spawnSync('npm', [...args, ...packages], { encoding: 'utf8' });
    if (npm.error) return `npm install failed: ${npm.error.message}`;
    if (npm.status !== 0) return `npm install exited with ${npm.status}: ${npm.stderr.trim()}`;
    try {
      return load(req);
    } catch (err) {
      return `installed but could not be loaded: ${err instanceof Error ? err.message : String(err)}`;
    }
  }
}

/** LanceDB's native build for this machine: its optional dependencies are skipped with the rest. */
function lancedbNativePackage(): string {
  const report = process.report.getReport() as { header?: { glibcVersionRuntime?: string } };
  const abi =
    process.platform === 'linux'
      ? report.header?.glibcVersionRuntime
        ? '-gnu'
        : '-musl'
      : process.platform === 'win32'
        ? '-msvc'
        : '';
  return `@lancedb/lancedb-${process.platform}-${process.arch}${abi}@${LANCEDB_VERSION}`;
}

/** One engine by name, or why it cannot be had. */
function engineNamed(name: EngineName): Engine | string {
  const cache = join(resolve(expandHome(parseConfig(process.env).cacheDir)), 'bench-engines');
  switch (name) {
    case 'usearch':
      return usearchEngine(ScalarKind.I8);
    case 'usearchF16':
      return usearchEngine(ScalarKind.F16);
    case 'hnswlib':
      return installed(
        join(cache, `hnswlib-node-${HNSWLIB_VERSION}`),
        [`hnswlib-node@${HNSWLIB_VERSION}`],
        (req) => hnswlibEngine(req('hnswlib-node') as Hnswlib),
      );
    case 'lancedb':
      return installed(
        join(cache, `lancedb-${LANCEDB_VERSION}`),
        [`@lancedb/lancedb@${LANCEDB_VERSION}`, lancedbNativePackage(), `apache-arrow@${ARROW_VERSION}`],
        (req) => lancedbEngine(req('@lancedb/lancedb') as Lance, req('apache-arrow') as Arrow),
      );
  }
}

/** The data set, written once by the parent and read by each phase's process. */
function generate(dir: string): void {
  const { vectors, queries, random } = textLikeVectors({
    n: N,
    queries: QUERIES,
    dimensions: DIMENSIONS,
    seed: SEED,
  });
  const allowed = Uint8Array.from({ length: N }, () => (random() < ALLOWED_FRACTION ? 1 : 0));
  writeFileSync(join(dir, 'vectors.f32'), vectors);
  writeFileSync(join(dir, 'queries.f32'), queries);
  writeFileSync(join(dir, 'allowed.u8'), allowed);
}

function readData(dir: string, withVectors: boolean): Data {
  const floats = (name: string) => {
    const bytes = readFileSync(join(dir, name));
    return new Float32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 4);
  };
  const allowed = new Uint8Array(readFileSync(join(dir, 'allowed.u8')));
  return {
    n: allowed.length,
    vectors: withVectors ? floats('vectors.f32') : new Float32Array(0),
    queries: floats('queries.f32'),
    allowed,
  };
}

/** Exact top-k by cosine (the vectors are unit length: by dot product), unfiltered and filtered. */
function exact(data: Data): { plain: number[][]; filtered: number[][] } {
  const plain: number[][] = [];
  const filtered: number[][] = [];
  for (let q = 0; q < QUERIES; q++) {
    const query = row(data.queries, q);
    const best = new TopK(K);
    const bestAllowed = new TopK(K);
    for (let i = 0; i < data.n; i++) {
      let dot = 0;
      for (let j = 0, at = i * DIMENSIONS; j < DIMENSIONS; j++, at++) dot += query[j]! * data.vectors[at]!;
      best.offer(dot, i);
      if (data.allowed[i] === 1) bestAllowed.offer(dot, i);
    }
    plain.push(best.ids);
    filtered.push(bestAllowed.ids);
  }
  return { plain, filtered };
}

/** The k highest scores seen, kept sorted: k is 10, so insertion beats a heap. */
class TopK {
  readonly ids: number[] = [];
  private readonly scores: number[] = [];

  constructor(private readonly k: number) {}

  offer(score: number, id: number): void {
    if (this.ids.length === this.k && score <= this.scores[this.k - 1]!) return;
    let at = Math.min(this.ids.length, this.k - 1);
    while (at > 0 && this.scores[at - 1]! < score) at--;
    this.scores.splice(at, 0, score);
    this.ids.splice(at, 0, id);
    this.scores.length = Math.min(this.scores.length, this.k);
    this.ids.length = this.scores.length;
  }
}

function recall(found: number[][], truth: number[][]): number {
  let hits = 0;
  found.forEach((ids, q) => {
    const wanted = new Set(truth[q]);
    hits += ids.filter((id) => wanted.has(id)).length;
  });
  return round(hits / (K * truth.length), 4);
}

async function measureSearches(index: Searchable, data: Data, clock: Clock): Promise<SearchReport> {
  const run = async (search: (query: Float32Array, k: number) => number[] | Promise<number[]>) => {
    const runs: Runs = { ids: [], ms: [] };
    // The first WARMUP_QUERIES (the last queries, again later) are not counted.
    for (let q = -WARMUP_QUERIES; q < QUERIES; q++) {
      const query = row(data.queries, (q + QUERIES) % QUERIES);
      const start = performance.now();
      const ids = await clock.call(() => search(query, K));
      if (q >= 0) {
        runs.ids.push(ids);
        runs.ms.push(performance.now() - start);
      }
      // A service answers one request per turn of the loop: the delay monitor sees each search.
      await yieldToLoop();
    }
    return runs;
  };
  await clock.lap();
  const plain = await run((query, k) => index.search(query, k));
  const filtered = await run((query, k) => index.filtered(query, k));
  return { plain, filtered, blocking: await clock.lap() };
}

/**
 * Bytes held after a full collection (the phase's process runs with --expose-gc): resident
 * memory outside V8's heap, plus the heap's live bytes. The heap's free space is left out:
 * V8 grows and shrinks it by tens of megabytes, whatever the engine holds.
 */
function settledMemory(): number {
  (globalThis as { gc?: () => void }).gc?.();
  const { rss, heapTotal, heapUsed } = process.memoryUsage();
  return rss - heapTotal + heapUsed;
}

async function runJob(job: Job): Promise<BuildReport | OpenReport> {
  const engine = engineNamed(job.engine);
  if (typeof engine === 'string') throw new Error(engine);
  const data = readData(job.dataDir, job.phase === 'build');
  const baseline = settledMemory();
  const clock = await Clock.start();
  if (job.phase !== 'build') {
    const start = performance.now();
    const index = await engine.open(data, job.indexDir, job.phase, clock);
    await clock.call(() => index.search(row(data.queries, 0), K));
    const openMs = performance.now() - start;
    const openBlocking = await clock.lap();
    const search = await measureSearches(index, data, clock);
    return { openMs, openBlocking, memoryBytes: settledMemory() - baseline, search };
  }
  mkdirSync(job.indexDir, { recursive: true });
  const start = performance.now();
  const index = await engine.build(data, job.indexDir, clock);
  const buildMs = performance.now() - start;
  const buildBlocking = await clock.lap();
  const memoryBytes = settledMemory() - baseline;
  const search = await measureSearches(index, data, clock);
  let saveMs: number | null = null;
  let saveBlocking: Blocking | null = null;
  const { save } = index;
  if (save) {
    const saveStart = performance.now();
    await clock.call(() => save(job.indexDir));
    saveMs = performance.now() - saveStart;
    saveBlocking = await clock.lap();
  }
  const erasureDir = join(job.dataDir, `${job.engine}-erasure`);
  mkdirSync(erasureDir);
  return {
    buildMs,
    buildBlocking,
    memoryBytes,
    engineBytes: index.bytes?.() ?? null,
    saveMs,
    saveBlocking,
    fileBytes: bytesUnder(job.indexDir),
    search,
    erasure: engine.erasure ? await engine.erasure(data, erasureDir) : null,
  };
}

/** One phase in a fresh process (this file, with the job in its environment): its report, or its error. */
function inChild<T>(job: Job): Promise<T> {
  return new Promise((done, fail) => {
    const child = spawn(process.execPath, [...process.execArgv, '--expose-gc', __filename], {
      env: { ...process.env, BENCH_ENGINES_JOB: JSON.stringify(job) },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (out += chunk));
    child.on('error', fail);
    child.on('close', (code) => {
      try {
        const parsed = JSON.parse(out) as { error?: string; report?: T };
        if (parsed.report) done(parsed.report);
        else fail(new Error(parsed.error ?? `exited with ${code}`));
      } catch {
        fail(new Error(`${job.engine} ${job.phase}: exited with ${code} and no report`));
      }
    });
  });
}

const perVector = (bytes: number | null, n: number) => (bytes === null ? null : round(bytes / n, 1));

function latencies(runs: Runs) {
  const sorted = [...runs.ms].sort((a, b) => a - b);
  return { p50Ms: round(percentile(sorted, 50), 3), p99Ms: round(percentile(sorted, 99), 3) };
}

async function compare(name: EngineName, engine: Engine, dir: string, truth: ReturnType<typeof exact>) {
  const job = { engine: name, dataDir: dir, indexDir: join(dir, name) };
  console.error(`[vector-engines] ${name}: building ${N} vectors`);
  const built = await inChild<BuildReport>({ ...job, phase: 'build' });
  const plain = latencies(built.search.plain);
  const filtered = latencies(built.search.filtered);
  const result: Record<string, unknown> = {
    version: engine.version,
    index: engine.index,
    filter: engine.filter,
    blocking: engine.blocking,
    recall10: recall(built.search.plain.ids, truth.plain),
    p50Ms: plain.p50Ms,
    p99Ms: plain.p99Ms,
    filteredRecall10: recall(built.search.filtered.ids, truth.filtered),
    filteredP50Ms: filtered.p50Ms,
    filteredP99Ms: filtered.p99Ms,
    buildMs: round(built.buildMs, 0),
    vectorsPerS: round((N / built.buildMs) * 1000, 0),
    bytesPerVector: perVector(built.memoryBytes, N),
    engineBytesPerVector: perVector(built.engineBytes, N),
    fileBytesPerVector: perVector(built.fileBytes, N),
    saveMs: built.saveMs === null ? null : round(built.saveMs, 0),
  };
  const maxBlockMs: Record<string, number | null> = {};
  const loopDelayMaxMs: Record<string, number | null> = {};
  const blocked = (phase: string, blocking: Blocking | null) => {
    maxBlockMs[phase] = blocking?.callMs ?? null;
    loopDelayMaxMs[phase] = blocking?.loopMs ?? null;
  };
  blocked('build', built.buildBlocking);
  blocked('search', built.search.blocking);
  blocked('save', built.saveBlocking);
  for (const phase of name.startsWith('usearch') ? (['open', 'view'] as const) : (['open'] as const)) {
    console.error(`[vector-engines] ${name}: ${phase} in a fresh process`);
    const opened = await inChild<OpenReport>({ ...job, phase });
    Object.assign(result, {
      [`${phase}Ms`]: round(opened.openMs, 1),
      [`${phase}BytesPerVector`]: perVector(opened.memoryBytes, N),
      [`${phase}Recall10`]: recall(opened.search.plain.ids, truth.plain),
      [`${phase}P99Ms`]: latencies(opened.search.plain).p99Ms,
    });
    blocked(phase, opened.openBlocking);
    blocked(`${phase}Search`, opened.search.blocking);
  }
  return { ...result, maxBlockMs, loopDelayMaxMs, erasure: built.erasure };
}

async function main() {
  const started = performance.now();
  const only = process.env.BENCH_ENGINES_ONLY?.split(',');
  const dir = mkdtempSync(join(tmpdir(), 'memgate-vector-engines-'));
  try {
    console.error(`[vector-engines] generating ${N} vectors and ${QUERIES} queries`);
    generate(dir);
    const truth = exact(readData(dir, true));
    console.error(
      `[vector-engines] data and exact answers in ${round((performance.now() - started) / 1000, 1)} s`,
    );
    const results: Record<string, unknown> = {};
    for (const name of ENGINES.filter((e) => !only || only.includes(e))) {
      const engine = engineNamed(name);
      try {
        if (typeof engine === 'string') throw new Error(engine);
        results[name] = await compare(name, engine, dir, truth);
      } catch (err) {
        results[name] = { error: err instanceof Error ? err.message : String(err) };
      }
      rmSync(join(dir, name), { recursive: true, force: true });
      const { recall10, p99Ms, buildMs, error } = results[name] as Record<string, unknown>;
      console.error(`[vector-engines] ${name}: ${JSON.stringify({ recall10, p99Ms, buildMs, error })}`);
    }
    emit({
      bench: 'vector-engines',
      n: N,
      dimensions: DIMENSIONS,
      queries: QUERIES,
      k: K,
      allowedFraction: ALLOWED_FRACTION,
      data: SYNTHETIC_DATA,
      memory:
        'bytesPerVector: growth of the build process (RSS off the V8 heap plus live heap, after a GC; the input vectors excluded); open/viewBytesPerVector: the same in a fresh process, opened and searched; engineBytesPerVector: the engine’s own count; fileBytesPerVector: what it persists',
      usearchAddBatch: USEARCH_BATCH,
      engines: results,
      node: process.version,
      cpus: cpus().length,
      totalS: round((performance.now() - started) / 1000, 0),
    });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const job = process.env.BENCH_ENGINES_JOB;
if (job) {
  runJob(JSON.parse(job) as Job).then(
    // Exits when written: an engine's worker threads need not keep the process up.
    (report) => process.stdout.write(JSON.stringify({ report }), () => process.exit(0)),
    (err: unknown) => {
      console.error(err);
      const error = err instanceof Error ? err.message : String(err);
      process.stdout.write(JSON.stringify({ error }), () => process.exit(1));
    },
  );
} else {
  void main().catch((err) => {
    console.error(err);
    process.exit(1);
  });
}
