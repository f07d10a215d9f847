import { mkdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { parentPort } from 'node:worker_threads';
import { Index, MetricKind, ScalarKind } from 'usearch';
import { stateInDefaultRecall, type RecallState } from '../core/recall';
import { seededRandom } from '../core/seededRandom';
import {
  indexFile,
  otherGenerations,
  stateFile,
  lengthPrefixed,
  readState,
  STATE_VERSION,
  unlinkPersisted,
  type StateHeader,
} from './persisted';
import type { Applied, EngineReply, EngineRequest, Found, Opened, PersistedAt } from './protocol';

/**
 * The vector engine's thread: every nearest-neighbour index of the process, in usearch
 * (HNSW over float16 vectors; bench/vector-engines.ts chose it), so that no build, load or
 * save runs on an event loop that serves requests or runs activities: every usearch call is
 * synchronous. Requests are served one at a time, in order.
 *
 * Beside each index, by label (usearch's integer key): the entry id, and the recall state
 * default recall filters on, so that the search applies the filter and returns only what
 * passes it (over-fetching while too few do).
 *
 * Erasure (docs/invariants.md, Erased from derived indexes). usearch's `remove` marks a slot
 * free and leaves its vector there, and `save` writes every slot; the next `add` takes the
 * freed slot (bench/vector-engines.ts measured both). So every removal is followed at once by
 * an add, into the freed slot, of a scrub vector under a key no entry has: no freed slot ever
 * holds an entry's vector, and a file saved later holds none removed. A new vector takes a
 * scrub's slot before a new one. What was persisted of an index is deleted at its first
 * removal since the save, and saved again later, without the vector. Scrubs keep the edges
 * of the vectors they replaced, so the graph leads searches astray as they accumulate: the
 * index is built afresh from the store once they pass a share of it (core/vectorCompaction.ts).
 */

const HNSW = { connectivity: 16, expansionAdd: 128, expansionSearch: 64 };
/** Keys from here on are scrubs' (entry labels are below 2^53). */
const SCRUB_BASE = 1n << 62n;
/** The most neighbours one search asks usearch for while the filter rejects too many. */
const MAX_FETCH = 8192;
/** Tier codes beside each label; no state (a record written before states were kept) passes. */
const NO_STATE = 0;
const TIER_CODE = { hot: 1, cold: 2 } as const;
const TIER_OF = [undefined, 'hot', 'cold'] as const;

interface Held {
  index: Index;
  dimensions: number;
  /** Each held id's label: built at its first use (`labelMap`), so not at open. */
  labelOf?: Map<string, number>;
  ids: (string | null)[];
  /** Ids held: the labels whose id is not null. */
  live: number;
  tier: Uint8Array;
  active: Uint8Array;
  dormantAt: Float64Array;
  freshUntil: Float64Array;
  salienceBase: Float64Array;
  salienceAt: Float64Array;
  /** Two hashes of each held vector: a record whose vector is the same changes only its state. */
  digestA: Uint32Array;
  digestB: Uint32Array;
  scrubs: bigint[];
  nextScrub: bigint;
  scrubVector: Float32Array;
  /** A uniform sample of the held vectors (reservoir), for the query's background. */
  sample: { label: number; vector: Float32Array }[];
  sampled: number;
  random: () => number;
  generation: number;
  persisted?: PersistedAt;
  /**
   * The file an opened index is memory-mapped from (usearch `view`), until its first change
   * loads it (`writable`): a view opens in tens of milliseconds where a load of 510,000
   * vectors takes 0.5–0.8 s, and searches it as fast once its pages are read.
   */
  viewing?: string;
}

const held = new Map<string, Held>();

function newIndex(dimensions: number): Index {
  return new Index({
    dimensions,
    metric: MetricKind.Cos,
    quantization: ScalarKind.F16,
    connectivity: HNSW.connectivity,
    expansion_add: HNSW.expansionAdd,
    expansion_search: HNSW.expansionSearch,
    multi: false,
  });
}

function blank(dimensions: number, index: Index, labels = 0): Held {
  const random = seededRandom(0x6d656d67);
  const scrubVector = new Float32Array(dimensions);
  // A fixed direction far from any text's: scrubs are never returned anyway.
  for (let i = 0; i < dimensions; i++) scrubVector[i] = random() - 0.5;
  const capacity = Math.max(16, labels);
  return {
    index,
    dimensions,
    ids: [],
    live: 0,
    tier: new Uint8Array(capacity),
    active: new Uint8Array(capacity),
    dormantAt: new Float64Array(capacity),
    freshUntil: new Float64Array(capacity),
    salienceBase: new Float64Array(capacity),
    salienceAt: new Float64Array(capacity),
    digestA: new Uint32Array(capacity),
    digestB: new Uint32Array(capacity),
    scrubs: [],
    nextScrub: SCRUB_BASE,
    scrubVector,
    sample: [],
    sampled: 0,
    random,
    generation: 0,
  };
}

/**
 * Each held id's label. An opened index builds it at its first change rather than at open:
 * half a million ids take about a third of a second to map, which a process that opens an
 * index to answer one search never needs (the search goes from label to id).
 */
function labelMap(h: Held): Map<string, number> {
  if (!h.labelOf) {
    const labelOf = new Map<string, number>();
    h.ids.forEach((id, label) => {
      if (id !== null) labelOf.set(id, label);
    });
    h.labelOf = labelOf;
  }
  return h.labelOf;
}

function heldIndex(key: string): Held {
  const h = held.get(key);
  if (!h) throw new Error(`no index ${key} is held`);
  return h;
}

function grow(h: Held, label: number): void {
  if (label < h.tier.length) return;
  const size = Math.max(label + 1, 2 * h.tier.length);
  const widen = <T extends Uint8Array | Uint32Array | Float64Array>(a: T, make: (n: number) => T): T => {
    const b = make(size);
    b.set(a);
    return b;
  };
  h.tier = widen(h.tier, (n) => new Uint8Array(n));
  h.active = widen(h.active, (n) => new Uint8Array(n));
  h.dormantAt = widen(h.dormantAt, (n) => new Float64Array(n));
  h.freshUntil = widen(h.freshUntil, (n) => new Float64Array(n));
  h.salienceBase = widen(h.salienceBase, (n) => new Float64Array(n));
  h.salienceAt = widen(h.salienceAt, (n) => new Float64Array(n));
  h.digestA = widen(h.digestA, (n) => new Uint32Array(n));
  h.digestB = widen(h.digestB, (n) => new Uint32Array(n));
}

/** FNV-1a over the vector's bytes, from two offset bases. */
function digests(vector: Float32Array): [number, number] {
  const bytes = new Uint8Array(vector.buffer, vector.byteOffset, vector.byteLength);
  let a = 0x811c9dc5;
  let b = 0x01000193 ^ 0x5bd1e995;
  for (let i = 0; i < bytes.length; i++) {
    a = Math.imul(a ^ bytes[i]!, 0x01000193);
    b = Math.imul(b ^ bytes[i]!, 0x01000193);
  }
  return [a >>> 0, b >>> 0];
}

function setDigest(h: Held, label: number, vector: Float32Array): void {
  grow(h, label);
  [h.digestA[label], h.digestB[label]] = digests(vector);
}

function sameVector(h: Held, label: number, vector: Float32Array): boolean {
  const [a, b] = digests(vector);
  return h.digestA[label] === a && h.digestB[label] === b;
}

function setState(h: Held, label: number, state: RecallState | undefined): void {
  grow(h, label);
  if (!state) {
    h.tier[label] = NO_STATE;
    return;
  }
  h.tier[label] = TIER_CODE[state.tier];
  h.active[label] = state.isActive ? 1 : 0;
  h.dormantAt[label] = state.dormantAt;
  h.freshUntil[label] = state.freshUntil ?? Number.POSITIVE_INFINITY;
  h.salienceBase[label] = state.salience.base;
  h.salienceAt[label] = state.salience.at;
}

function passes(h: Held, label: number, now: number): boolean {
  const tier = TIER_OF[h.tier[label]!];
  if (tier === undefined) return true;
  const freshUntil = h.freshUntil[label]!;
  return stateInDefaultRecall(
    {
      tier,
      isActive: h.active[label] === 1,
      dormantAt: h.dormantAt[label]!,
      ...(freshUntil === Number.POSITIVE_INFINITY ? {} : { freshUntil }),
    },
    now,
  );
}

/** Fill the slot a removal just freed with a scrub vector (see Erasure above). */
function scrubFreedSlot(h: Held): void {
  const key = h.nextScrub++;
  h.index.add(key, h.scrubVector, 1);
  h.scrubs.push(key);
}

function removeLabel(h: Held, id: string, label: number): void {
  h.index.remove(BigInt(label));
  scrubFreedSlot(h);
  labelMap(h).delete(id);
  h.ids[label] = null;
  h.live--;
  const at = h.sample.findIndex((s) => s.label === label);
  if (at >= 0) h.sample.splice(at, 1);
}

function sampleAdd(h: Held, label: number, vector: Float32Array): void {
  const wanted = SAMPLE_CAPACITY;
  h.sampled++;
  if (h.sample.length < wanted) h.sample.push({ label, vector: vector.slice() });
  else {
    const j = Math.floor(h.random() * h.sampled);
    if (j < wanted) h.sample[j] = { label, vector: vector.slice() };
  }
}

/** Vectors a sample keeps (core/hybrid.ts asks for BACKGROUND_SAMPLE: no more is needed). */
const SAMPLE_CAPACITY = 256;

/**
 * A viewed index is read-only: it is loaded before its first change. From its file, or,
 * when that file was replaced since (a process that shares the directory saved), from a copy
 * of the view itself.
 */
function writable(h: Held): void {
  const from = h.viewing;
  if (from === undefined) return;
  const index = newIndex(h.dimensions);
  try {
    index.load(from);
  } catch {
    const copy = `${from}.${process.pid}.copy`;
    h.index.save(copy);
    try {
      index.load(copy);
    } finally {
      rmSync(copy, { force: true });
    }
  }
  h.index = index;
  h.viewing = undefined;
}

function apply(h: Held, req: Extract<EngineRequest, { op: 'apply' }>): Applied {
  writable(h);
  const labelOf = labelMap(h);
  let removed = false;
  for (const id of req.removals) {
    const label = labelOf.get(id);
    if (label === undefined) continue;
    removeLabel(h, id, label);
    removed = true;
  }
  const fresh: { label: number; at: number }[] = [];
  req.upserts.forEach(({ id, state }, i) => {
    const vector = req.vectors.subarray(i * h.dimensions, (i + 1) * h.dimensions);
    const label = labelOf.get(id);
    if (label !== undefined && sameVector(h, label, vector)) {
      // Its state changed, not its vector.
    } else if (label !== undefined) {
      // remove then add: the new vector takes the freed slot, over the old one.
      setDigest(h, label, vector);
      h.index.remove(BigInt(label));
      h.index.add(BigInt(label), vector, 1);
      const s = h.sample.find((x) => x.label === label);
      if (s) s.vector = vector.slice();
      removed = true;
    } else {
      const next = h.ids.length;
      h.ids.push(id);
      labelOf.set(id, next);
      h.live++;
      setDigest(h, next, vector);
      const scrub = h.scrubs.pop();
      if (scrub !== undefined) {
        h.index.remove(scrub);
        h.index.add(BigInt(next), vector, 1);
      } else fresh.push({ label: next, at: i });
      sampleAdd(h, next, vector);
    }
    setState(h, labelOf.get(id)!, state);
  });
  if (fresh.length) {
    const keys = BigUint64Array.from(fresh, (f) => BigInt(f.label));
    const matrix = new Float32Array(fresh.length * h.dimensions);
    fresh.forEach((f, j) =>
      matrix.set(req.vectors.subarray(f.at * h.dimensions, (f.at + 1) * h.dimensions), j * h.dimensions),
    );
    // Threads 0: all cores; this thread waits for them, the process's event loops do not.
    h.index.add(keys, matrix, 0);
  }
  if (removed && h.persisted) unlinkPersisted(h.persisted);
  return { size: h.live, removed, scrubs: h.scrubs.length };
}

function cosine(a: Float32Array, b: Float32Array): number {
  let dot = 0;
  let na = 0;
  let nb = 0;
  for (let i = 0; i < a.length; i++) {
    dot += a[i]! * b[i]!;
    na += a[i]! * a[i]!;
    nb += b[i]! * b[i]!;
  }
  return na > 0 && nb > 0 ? dot / Math.sqrt(na * nb) : 0;
}

function search(h: Held, req: Extract<EngineRequest, { op: 'search' }>): Found {
  const total = Number(h.index.size());
  const k = Math.max(0, Math.floor(req.k));
  const filter = req.defaultRecallAt;
  let rejected = 0;
  let neighbours: Found['neighbours'] = [];
  if (k > 0 && h.live > 0) {
    // Scrubs rank too; with a filter, ask for more than k from the start, then for as many as
    // the share that passed says k needs (with a margin), so that a filter that rejects most
    // of an agent (a long-lived agent's entries are mostly dormant or cold) costs two searches,
    // not a search per doubling. A wider search costs about what it asks for, so it asks for
    // what `enough` needs, and none is made once `enough` passed.
    let wanted = filter === undefined ? k + h.scrubs.length : Math.max(2 * k, 32);
    const enough = Math.min(k, req.enough ?? k);
    for (;;) {
      const asked = Math.min(wanted, total, MAX_FETCH);
      const found = h.index.search(req.query, asked, 1);
      neighbours = [];
      rejected = 0;
      for (let i = 0; i < found.keys.length && neighbours.length < k; i++) {
        const key = found.keys[i]!;
        if (key >= SCRUB_BASE) continue;
        const label = Number(key);
        if (filter !== undefined && !passes(h, label, filter)) {
          rejected++;
          continue;
        }
        const n: Found['neighbours'][number] = { id: h.ids[label]!, similarity: 1 - found.distances[i]! };
        const tier = TIER_OF[h.tier[label]!];
        if (tier !== undefined) {
          n.salience = { base: h.salienceBase[label]!, at: h.salienceAt[label]! };
          n.tier = tier;
        }
        neighbours.push(n);
      }
      if (neighbours.length >= enough || asked >= total || asked >= MAX_FETCH) break;
      wanted = Math.max(2 * asked, Math.ceil((1.5 * enough * asked) / Math.max(neighbours.length, 1)));
    }
  }
  const background = h.sample.slice(0, req.sample).map((s) => cosine(req.query, s.vector));
  return { neighbours, background, rejected };
}

// Persistence -----------------------------------------------------------------------------

/**
 * The latest generation this process wrote or opened at each base: a new index of the same
 * base (a rebuild, a load after a drop) saves past it, so a file name never stands for two
 * contents while another index of the process may still view the one it had.
 */
const lastGeneration = new Map<string, number>();

function save(h: Held, at: PersistedAt, meta: unknown): { bytes: number } {
  mkdirSync(dirname(at.base), { recursive: true });
  const generation = Math.max(h.generation, lastGeneration.get(at.base) ?? 0) + 1;
  lastGeneration.set(at.base, generation);
  const file = indexFile(at, generation);
  h.index.save(`${file}.tmp`);
  renameSync(`${file}.tmp`, file);
  // A view's later load reads the file just written, of the same vectors: the one it maps is
  // deleted below (the mapping keeps it readable).
  if (h.viewing !== undefined) h.viewing = file;
  const labels = h.ids.length;
  const header: StateHeader = {
    version: STATE_VERSION,
    dimensions: h.dimensions,
    generation,
    labels,
    scrubs: h.scrubs.map(String),
    nextScrub: String(h.nextScrub),
    sampleLabels: h.sample.map((s) => s.label),
    sampled: h.sampled,
    meta,
  };
  const parts = [
    ...lengthPrefixed(header),
    ...lengthPrefixed(h.ids),
    Buffer.from(h.tier.buffer, 0, labels),
    Buffer.from(h.active.buffer, 0, labels),
    Buffer.from(h.dormantAt.buffer, 0, 8 * labels),
    Buffer.from(h.freshUntil.buffer, 0, 8 * labels),
    Buffer.from(h.salienceBase.buffer, 0, 8 * labels),
    Buffer.from(h.salienceAt.buffer, 0, 8 * labels),
    Buffer.from(h.digestA.buffer, 0, 4 * labels),
    Buffer.from(h.digestB.buffer, 0, 4 * labels),
    ...h.sample.map((s) => Buffer.from(s.vector.buffer, s.vector.byteOffset, s.vector.byteLength)),
  ];
  writeFileSync(`${stateFile(at)}.tmp`, Buffer.concat(parts));
  renameSync(`${stateFile(at)}.tmp`, stateFile(at));
  for (const f of otherGenerations(at, generation)) rmSync(f, { force: true });
  h.generation = generation;
  h.persisted = at;
  return { bytes: statSync(file).size };
}

/** Copied out at `offset`: a typed array over a file's bytes must start aligned. */
function read<T>(buf: Buffer, offset: number, bytes: number, make: (b: ArrayBuffer) => T): T {
  const copy = new ArrayBuffer(bytes);
  new Uint8Array(copy).set(buf.subarray(offset, offset + bytes));
  return make(copy);
}

/**
 * The index persisted at `at`, held under `key`; null where there is none to open, and where
 * its files do not read as a whole (a save cut off by a machine lost before it reached the
 * disk): those are deleted, and the index is loaded from the store.
 */
function open(key: string, dimensions: number, at: PersistedAt): Opened | null {
  let buf: Buffer;
  try {
    buf = readFileSync(stateFile(at));
  } catch {
    return null;
  }
  try {
    return openState(key, dimensions, at, buf);
  } catch {
    unlinkPersisted(at);
    return null;
  }
}

function openState(key: string, dimensions: number, at: PersistedAt, buf: Buffer): Opened | null {
  const { header, ids, end } = readState(buf);
  if (header.version !== STATE_VERSION || header.dimensions !== dimensions) return null;
  const index = newIndex(dimensions);
  const file = indexFile(at, header.generation);
  index.view(file);
  const labels = header.labels;
  const h = blank(dimensions, index, labels);
  let offset = end;
  h.tier.set(read(buf, offset, labels, (b) => new Uint8Array(b)));
  offset += labels;
  h.active.set(read(buf, offset, labels, (b) => new Uint8Array(b)));
  offset += labels;
  h.dormantAt.set(read(buf, offset, 8 * labels, (b) => new Float64Array(b)));
  offset += 8 * labels;
  h.freshUntil.set(read(buf, offset, 8 * labels, (b) => new Float64Array(b)));
  offset += 8 * labels;
  h.salienceBase.set(read(buf, offset, 8 * labels, (b) => new Float64Array(b)));
  offset += 8 * labels;
  h.salienceAt.set(read(buf, offset, 8 * labels, (b) => new Float64Array(b)));
  offset += 8 * labels;
  h.digestA.set(read(buf, offset, 4 * labels, (b) => new Uint32Array(b)));
  offset += 4 * labels;
  h.digestB.set(read(buf, offset, 4 * labels, (b) => new Uint32Array(b)));
  offset += 4 * labels;
  h.ids = ids;
  h.live = ids.reduce((n, id) => (id === null ? n : n + 1), 0);
  h.scrubs = header.scrubs.map(BigInt);
  h.nextScrub = BigInt(header.nextScrub);
  h.sample = header.sampleLabels.map((label) => {
    const vector = read(buf, offset, 4 * dimensions, (b) => new Float32Array(b));
    offset += 4 * dimensions;
    return { label, vector };
  });
  h.sampled = header.sampled;
  h.generation = header.generation;
  lastGeneration.set(at.base, Math.max(lastGeneration.get(at.base) ?? 0, header.generation));
  h.persisted = at;
  h.viewing = file;
  if (Number(index.size()) !== h.live + h.scrubs.length) {
    // Not the index its state describes: it is rebuilt from the store.
    unlinkPersisted(at);
    return null;
  }
  held.set(key, h);
  return { size: h.live, scrubs: h.scrubs.length, meta: header.meta };
}

function handle(req: EngineRequest): unknown {
  switch (req.op) {
    case 'create': {
      held.set(req.key, blank(req.dimensions, newIndex(req.dimensions)));
      return { size: 0 };
    }
    case 'open':
      return open(req.key, req.dimensions, req.at);
    case 'apply':
      return apply(heldIndex(req.key), req);
    case 'search':
      return search(heldIndex(req.key), req);
    case 'save':
      return save(heldIndex(req.key), req.at, req.meta);
    case 'unlink':
      unlinkPersisted(req.at);
      return null;
    case 'drop':
      held.delete(req.key);
      return null;
  }
}

parentPort!.on('message', ({ id, req }: { id: number; req: EngineRequest }) => {
  let reply: EngineReply;
  try {
    reply = { id, ok: true, value: handle(req) };
  } catch (err) {
    reply = { id, ok: false, error: err instanceof Error ? err.message : String(err) };
  }
  parentPort!.postMessage(reply);
});
