import { InvalidInputError } from './errors';

/**
 * Semantic recall's nearest-neighbour index: an agent's embeddings held in memory, searched
 * without scanning the store per query.
 *
 * Memory. Each vector is int8 scalar-quantised (one byte per dimension, packed four to a
 * 32-bit word, with a float32 scale): `4·⌈dimensions/4⌉ + 12` bytes each — codes, scale, its
 * list number and its entry in that list — so 396 bytes at 384 dimensions; plus its id
 * (`ID_OVERHEAD_BYTES` and two bytes a character); plus the centroids, quantised the same
 * way, about `2·√n` of them (under 2 bytes a vector at 250,000). Storage grows in chunks, so
 * a growing index never holds two copies of itself and a shrinking one gives memory back;
 * `bytes` reports what is held. No float copy of a vector is kept: similarities are
 * computed against the dequantised codes (within about 0.001 of the true cosine at 384
 * dimensions).
 *
 * Search. Up to `VISIT_BUDGET` vectors the index is a flat, exact scan. Beyond it, an
 * inverted file (IVF) of about 2·√n lists: each vector sits in one list (see Training),
 * and a search scores the lists nearest the query first until it has scored
 * `VISIT_BUDGET` vectors — so a search costs about the same at any size, and is exact
 * while the index holds no more than one search visits. Scoring is integer arithmetic on
 * the packed codes (the query quantised finely), which V8 runs faster than float
 * arithmetic on bytes.
 *
 * Training. Centroids come from spherical k-means on a deterministic sample (a seeded
 * generator, no Math.random: the same operations build the same index), in two levels —
 * about √lists coarse groups, each with its own lists. A vector goes to the nearest list
 * among those of its `GROUPS_SEARCHED` nearest groups — usually, not always, its nearest
 * overall — so placing it scores about 3·√lists centroids (about 100 at 250,000) rather
 * than all 2·√n. The partition is retrained when the index has doubled, or fallen to a
 * quarter, since it was trained (a constant number of trainings per vector, amortised);
 * meanwhile a new vector joins its nearest list. Training runs synchronously inside the
 * `upsert` or `remove` that triggers it and takes about 50 µs a vector at 384 dimensions
 * (about 6 s at 131,072 vectors), holding 12 bytes a vector of scratch meanwhile.
 */

export interface Neighbour {
  id: string;
  similarity: number;
}

/**
 * Vectors one search scores. At 384 dimensions scoring one takes 0.3–0.6 µs in Node 20 on
 * one core, so a search takes about 5 ms whatever the index's size (measured at 250,000);
 * the flat scan below this size costs no more than a probe would. A larger budget finds
 * more true neighbours for proportionally more time.
 */
export const VISIT_BUDGET = 8192;

/**
 * Per id, beyond two bytes a character: the string's header, its map entry and its slot's
 * reference (V8 on 64 bits, the map's spare capacity averaged in; 15-character ids measure
 * 94–107 bytes each in Node 20).
 */
export const ID_OVERHEAD_BYTES = 72;

/** Slots per full chunk: large enough to amortise allocation, small enough as slack. */
const CHUNK_SHIFT = 10;
const CHUNK_SLOTS = 1 << CHUNK_SHIFT;
const CHUNK_MASK = CHUNK_SLOTS - 1;
/** The last chunk starts this small and doubles, so a small index holds little. */
const MIN_CHUNK_SLOTS = 16;
const MIN_LIST_CAPACITY = 8;

/**
 * Lists per √n. Finer lists than the textbook √n find more true neighbours for the same
 * number of vectors scored (measured on clustered data), and their centroids are cheap.
 */
const LISTS_PER_ROOT = 2;
/** Sampled vectors k-means sees per list it trains. */
const SAMPLE_PER_LIST = 24;
/** Of them, per coarse group: a few dozen suffice for a centroid that only routes. */
const SAMPLE_PER_GROUP = 64;
/**
 * Coarse groups whose lists a new vector is compared with: its nearest centroid overall is
 * usually, not always, under its nearest group.
 */
const GROUPS_SEARCHED = 2;
/** Lloyd rounds after k-means++ seeding; lists need not be optimal, only coherent. */
const KMEANS_ROUNDS = 4;
const SEED = 0x6d656d67;
/** The largest int8 code: symmetric, so -127…127 and zero stays exact. */
const CODE_MAX = 127;

/** Vectors or centroids: int8 codes packed four to an Int32 word, a dequantisation scale each. */
interface Codes {
  words: Int32Array;
  scales: Float32Array;
}

interface Chunk extends Codes {
  /** The list each slot is in (unused while flat). */
  lists: Int32Array;
}

interface Partition {
  /** Size of the index when trained: retrained at twice or a quarter of it. */
  trainedAt: number;
  groups: Codes;
  /** The lists of group g are firstList[g] … firstList[g + 1] - 1. */
  firstList: Int32Array;
  lists: Codes;
  /** Each list's slots; the first `lengths[l]` entries are live. */
  members: Int32Array[];
  lengths: Int32Array;
}

interface Shape {
  largest: number;
  norm: number;
}

export class VectorIndex {
  /** Words per vector. */
  private readonly stride: number;
  /**
   * The query's integer range: as fine as the int32 sums allow, so the query adds no
   * error worth the name to the vectors' own quantisation.
   */
  private readonly queryMax: number;
  private readonly chunks: Chunk[] = [];
  /** Slot → id; slots are dense (a removal moves the last slot into the hole). */
  private readonly ids: string[] = [];
  private readonly slots = new Map<string, number>();
  private idChars = 0;
  private partition: Partition | undefined;
  /** One vector's codes unpacked, one to an Int32 (zero-padded): what `dot` takes as query. */
  private readonly unpacked: Int32Array;

  constructor(readonly dimensions: number) {
    if (!Number.isInteger(dimensions) || dimensions < 1) {
      throw new InvalidInputError('invalid vector index', [
        { path: 'dimensions', message: `${dimensions} is not a positive integer` },
      ]);
    }
    this.stride = Math.ceil(dimensions / 4);
    // `dot` sums 2·stride products of a query entry and a code into each of two int32s.
    this.queryMax = Math.min(32767, Math.floor(0x7fffffff / (2 * this.stride * CODE_MAX + 1)));
    this.unpacked = new Int32Array(4 * this.stride);
  }

  get size(): number {
    return this.ids.length;
  }

  has(id: string): boolean {
    return this.slots.has(id);
  }

  /** Approximate bytes held (vectors, ids, lists): what the process-wide bound counts. */
  get bytes(): number {
    let bytes = this.idChars * 2 + this.size * ID_OVERHEAD_BYTES;
    for (const chunk of this.chunks) {
      bytes += chunk.words.byteLength + chunk.scales.byteLength + chunk.lists.byteLength;
    }
    const p = this.partition;
    if (p) {
      bytes += p.groups.words.byteLength + p.groups.scales.byteLength + p.firstList.byteLength;
      bytes += p.lists.words.byteLength + p.lists.scales.byteLength + p.lengths.byteLength;
      for (const members of p.members) bytes += members.byteLength;
    }
    return bytes;
  }

  /** Insert or replace. The vector must have `dimensions` entries; it is normalised on the way in. */
  upsert(id: string, vector: Float32Array): void {
    const shape = this.shapeOf(vector, 'vector');
    const existing = this.slots.get(id);
    if (existing !== undefined) {
      this.encode(vector, 0, shape, this.chunkOf(existing), existing & CHUNK_MASK);
      if (this.partition) this.moveToList(existing, this.nearestList(this.partition, this.unpacked));
      return;
    }
    const slot = this.size;
    this.reserve(slot);
    this.ids.push(id);
    this.slots.set(id, slot);
    this.idChars += id.length;
    this.encode(vector, 0, shape, this.chunkOf(slot), slot & CHUNK_MASK);
    const p = this.partition;
    if (p ? this.size >= 2 * p.trainedAt : this.size > VISIT_BUDGET) this.repartition();
    else if (p) this.addToList(p, this.nearestList(p, this.unpacked), slot);
  }

  remove(id: string): boolean {
    const slot = this.slots.get(id);
    if (slot === undefined) return false;
    const last = this.size - 1;
    const p = this.partition;
    if (p) this.removeFromList(p, this.chunkOf(slot).lists[slot & CHUNK_MASK]!, slot);
    if (slot !== last) this.moveSlot(last, slot);
    this.ids.pop();
    this.slots.delete(id);
    this.idChars -= id.length;
    this.release();
    if (p && this.size <= p.trainedAt / 4) this.repartition();
    return true;
  }

  /**
   * Up to k ids, most similar first (ties by id, in code-unit order, for determinism).
   * `accept` filters ids during the search without reducing k: it is asked only about ids
   * that would rank, and while fewer than k are accepted the search probes further lists
   * (up to the whole index when it rejects nearly everything).
   */
  search(query: Float32Array, k: number, accept?: (id: string) => boolean): Neighbour[] {
    const shape = this.shapeOf(query, 'query');
    if (!Number.isInteger(k)) {
      throw new InvalidInputError('invalid search', [{ path: 'k', message: `${k} is not an integer` }]);
    }
    if (k < 1 || this.size === 0) return [];
    const { q, queryScale } = this.quantiseQuery(query, shape);

    const best = new Best(Math.min(k, this.size));
    const p = this.partition;
    if (!p) {
      for (let slot = 0; slot < this.size; slot++) this.consider(q, queryScale, slot, best, accept);
      return best.sorted();
    }
    const lists = p.lengths.length;
    const closeness = new Float64Array(lists);
    for (let l = 0; l < lists; l++) closeness[l] = similarity(q, p.lists, l, this.stride);
    const order = Array.from({ length: lists }, (_, l) => l).sort(
      (a, b) => closeness[b]! - closeness[a]! || a - b,
    );
    let visited = 0;
    for (const l of order) {
      if (visited >= VISIT_BUDGET && best.full) break;
      const members = p.members[l]!;
      const length = p.lengths[l]!;
      for (let m = 0; m < length; m++) this.consider(q, queryScale, members[m]!, best, accept);
      visited += length;
    }
    return best.sorted();
  }

  /**
   * The query's similarities to up to `n` of the vectors, evenly spaced over the slots (so the
   * same index answers the same sample): the background hybrid recall measures a neighbour
   * against (core/hybrid.ts).
   */
  sampleSimilarities(query: Float32Array, n: number): number[] {
    const { q, queryScale } = this.quantiseQuery(query, this.shapeOf(query, 'query'));
    const count = Math.min(n, this.size);
    const out: number[] = [];
    for (let i = 0; i < count; i++) {
      const slot = Math.floor((i * this.size) / count);
      const chunk = this.chunks[slot >>> CHUNK_SHIFT]!;
      const at = slot & CHUNK_MASK;
      out.push(queryScale * chunk.scales[at]! * dot(q, chunk.words, at * this.stride, this.stride));
    }
    return out;
  }

  /** The query in the integer range `dot` takes, and the scale back to a cosine. */
  private quantiseQuery(query: Float32Array, shape: Shape): { q: Int32Array; queryScale: number } {
    const q = new Int32Array(4 * this.stride);
    const step = this.queryMax / shape.largest;
    for (let i = 0; i < this.dimensions; i++) q[i] = Math.round(query[i]! * step);
    return { q, queryScale: shape.largest / (this.queryMax * shape.norm) };
  }

  private consider(
    q: Int32Array,
    queryScale: number,
    slot: number,
    best: Best,
    accept: ((id: string) => boolean) | undefined,
  ): void {
    // Inlined rather than `similarity`: the chunks alone reach this line, so it stays monomorphic.
    const chunk = this.chunks[slot >>> CHUNK_SHIFT]!;
    const at = slot & CHUNK_MASK;
    const score = queryScale * chunk.scales[at]! * dot(q, chunk.words, at * this.stride, this.stride);
    const id = this.ids[slot]!;
    if (best.admits(score, id) && (!accept || accept(id))) best.add(score, id);
  }

  /** The vector's largest magnitude and length; throws unless it has `dimensions` finite entries, not all zero. */
  private shapeOf(vector: Float32Array, path: string): Shape {
    if (vector.length !== this.dimensions) {
      throw new InvalidInputError(`invalid ${path}`, [
        { path, message: `has ${vector.length} entries, expected ${this.dimensions}` },
      ]);
    }
    for (let i = 0; i < vector.length; i++) {
      if (!Number.isFinite(vector[i])) {
        throw new InvalidInputError(`invalid ${path}`, [
          { path: `${path}.${i}`, message: `${vector[i]} is not finite` },
        ]);
      }
    }
    const shape = measure(vector, 0, this.dimensions);
    if (shape.largest === 0) {
      throw new InvalidInputError(`invalid ${path}`, [{ path, message: 'is zero, so it has no direction' }]);
    }
    return shape;
  }

  /**
   * Normalise and quantise `values[offset …]` into entry `index` of `into`: the largest
   * magnitude becomes ±127. The codes stay in `unpacked` for the caller to route.
   */
  private encode(values: ArrayLike<number>, offset: number, shape: Shape, into: Codes, index: number): void {
    const step = CODE_MAX / shape.largest;
    for (let i = 0; i < this.dimensions; i++) this.unpacked[i] = Math.round(values[offset + i]! * step);
    pack(this.unpacked, into.words, index * this.stride);
    into.scales[index] = shape.largest / (CODE_MAX * shape.norm);
  }

  private chunkOf(slot: number): Chunk {
    return this.chunks[slot >>> CHUNK_SHIFT]!;
  }

  /** Room for a new slot at the end: a new chunk, or the last one doubled (never a full copy of the index). */
  private reserve(slot: number): void {
    const index = slot >>> CHUNK_SHIFT;
    const chunk = this.chunks[index];
    if (!chunk) this.chunks.push(this.newChunk(MIN_CHUNK_SLOTS));
    else if ((slot & CHUNK_MASK) === chunk.scales.length) {
      this.chunks[index] = this.resized(chunk, chunk.scales.length * 2);
    }
  }

  /** After a removal: drop an empty last chunk, halve one at most a quarter full (hysteresis against thrashing). */
  private release(): void {
    const used = this.size === 0 ? 0 : ((this.size - 1) >>> CHUNK_SHIFT) + 1;
    if (this.chunks.length > used) this.chunks.pop();
    const last = this.chunks[used - 1];
    if (!last) return;
    const occupied = this.size - (used - 1) * CHUNK_SLOTS;
    const capacity = last.scales.length;
    if (capacity > MIN_CHUNK_SLOTS && occupied <= capacity / 4) {
      this.chunks[used - 1] = this.resized(last, capacity / 2);
    }
  }

  private newChunk(slots: number): Chunk {
    return {
      words: new Int32Array(slots * this.stride),
      scales: new Float32Array(slots),
      lists: new Int32Array(slots),
    };
  }

  private resized(chunk: Chunk, slots: number): Chunk {
    const next = this.newChunk(slots);
    const kept = Math.min(slots, chunk.scales.length);
    next.words.set(chunk.words.subarray(0, kept * this.stride));
    next.scales.set(chunk.scales.subarray(0, kept));
    next.lists.set(chunk.lists.subarray(0, kept));
    return next;
  }

  /** Move slot `from` (the last) into `to`, keeping its list membership. */
  private moveSlot(from: number, to: number): void {
    const source = this.chunkOf(from);
    const target = this.chunkOf(to);
    const fromAt = from & CHUNK_MASK;
    const toAt = to & CHUNK_MASK;
    const stride = this.stride;
    target.words.set(source.words.subarray(fromAt * stride, fromAt * stride + stride), toAt * stride);
    target.scales[toAt] = source.scales[fromAt]!;
    const list = source.lists[fromAt]!;
    target.lists[toAt] = list;
    const p = this.partition;
    if (p) {
      const members = p.members[list]!;
      members[members.lastIndexOf(from, p.lengths[list]! - 1)] = to;
    }
    const id = this.ids[from]!;
    this.ids[to] = id;
    this.slots.set(id, to);
  }

  private moveToList(slot: number, list: number): void {
    const p = this.partition!;
    const current = this.chunkOf(slot).lists[slot & CHUNK_MASK]!;
    if (current === list) return;
    this.removeFromList(p, current, slot);
    this.addToList(p, list, slot);
  }

  private addToList(p: Partition, list: number, slot: number): void {
    let members = p.members[list]!;
    const length = p.lengths[list]!;
    if (length === members.length) {
      members = resizedList(members, Math.max(MIN_LIST_CAPACITY, Math.ceil(length * 1.5)));
      p.members[list] = members;
    }
    members[length] = slot;
    p.lengths[list] = length + 1;
    this.chunkOf(slot).lists[slot & CHUNK_MASK] = list;
  }

  /** Swap-remove from the list (a list holds about √n/2 slots, so the linear find is cheap). */
  private removeFromList(p: Partition, list: number, slot: number): void {
    const members = p.members[list]!;
    const length = p.lengths[list]! - 1;
    members[members.lastIndexOf(slot, length)] = members[length]!;
    p.lengths[list] = length;
    if (members.length > MIN_LIST_CAPACITY && length <= members.length / 4) {
      p.members[list] = resizedList(members.subarray(0, length), Math.ceil(members.length / 2));
    }
  }

  /** The list nearest the unpacked codes, among the lists of the `GROUPS_SEARCHED` nearest groups. */
  private nearestList(p: Partition, codes: Int32Array): number {
    const groups = p.groups.scales.length;
    const closeness = new Float64Array(groups);
    for (let g = 0; g < groups; g++) closeness[g] = similarity(codes, p.groups, g, this.stride);
    let best = -1;
    let bestSimilarity = -Infinity;
    for (let searched = 0; searched < Math.min(GROUPS_SEARCHED, groups); searched++) {
      const group = nearest(closeness);
      closeness[group] = -Infinity;
      for (let l = p.firstList[group]!; l < p.firstList[group + 1]!; l++) {
        const s = similarity(codes, p.lists, l, this.stride);
        if (s > bestSimilarity || (s === bestSimilarity && l < best)) {
          best = l;
          bestSimilarity = s;
        }
      }
    }
    return best;
  }

  /** Train the partition anew on a sample of the index and reassign every vector; flat while small. */
  private repartition(): void {
    const n = this.size;
    if (n <= VISIT_BUDGET) {
      this.partition = undefined;
      return;
    }
    const random = seededRandom(SEED);
    const listCount = Math.round(LISTS_PER_ROOT * Math.sqrt(n));
    const groupCount = Math.round(Math.sqrt(listCount));
    const sample = sampleSlots(n, Math.min(n, SAMPLE_PER_LIST * listCount), random);
    // The sample is in random order, so any prefix of it is a sample too.
    const coarse = this.kmeans(sample.subarray(0, SAMPLE_PER_GROUP * groupCount), groupCount, random);

    const byGroup: number[][] = Array.from({ length: coarse.scales.length }, () => []);
    for (const slot of sample) byGroup[this.nearestCentroid(slot, coarse)]!.push(slot);
    // A group that drew no sampled vector has no lists; routing never picks it.
    const kept = byGroup.flatMap((points, g) => (points.length > 0 ? [{ points, g }] : []));
    const fine = kept.map(({ points }) =>
      this.kmeans(
        Int32Array.from(points),
        Math.max(1, Math.round((listCount * points.length) / sample.length)),
        random,
      ),
    );

    const stride = this.stride;
    const total = fine.reduce((sum, f) => sum + f.scales.length, 0);
    const partition: Partition = {
      trainedAt: n,
      groups: { words: new Int32Array(kept.length * stride), scales: new Float32Array(kept.length) },
      firstList: new Int32Array(kept.length + 1),
      lists: { words: new Int32Array(total * stride), scales: new Float32Array(total) },
      members: [],
      lengths: new Int32Array(total),
    };
    let first = 0;
    kept.forEach(({ g }, i) => {
      partition.groups.words.set(coarse.words.subarray(g * stride, g * stride + stride), i * stride);
      partition.groups.scales[i] = coarse.scales[g]!;
      partition.firstList[i] = first;
      partition.lists.words.set(fine[i]!.words, first * stride);
      partition.lists.scales.set(fine[i]!.scales, first);
      first += fine[i]!.scales.length;
    });
    partition.firstList[kept.length] = first;

    const assigned = new Int32Array(n);
    for (let slot = 0; slot < n; slot++) {
      this.unpack(slot);
      assigned[slot] = this.nearestList(partition, this.unpacked);
      partition.lengths[assigned[slot]!]!++;
    }

    // Lay the vectors out list by list, so that a probe reads memory in order: scoring
    // vectors scattered over a large index takes twice as long (measured at 250,000).
    const target = new Int32Array(n);
    const next = new Int32Array(total);
    for (let l = 1; l < total; l++) next[l] = next[l - 1]! + partition.lengths[l - 1]!;
    for (let slot = 0; slot < n; slot++) target[slot] = next[assigned[slot]!]!++;
    this.permute(target);
    let slot = 0;
    partition.members = Array.from(partition.lengths, (length, l) => {
      const members = new Int32Array(Math.max(MIN_LIST_CAPACITY, length));
      for (let m = 0; m < length; m++, slot++) {
        members[m] = slot;
        this.chunkOf(slot).lists[slot & CHUNK_MASK] = l;
      }
      return members;
    });
    this.partition = partition;
  }

  /** Move every slot s to `target[s]` in place (cycle by cycle, one vector of scratch). */
  private permute(target: Int32Array): void {
    const stride = this.stride;
    const scratch = new Int32Array(stride);
    for (let i = 0; i < target.length; i++) {
      for (let j = target[i]!; j !== i; j = target[i]!) {
        // Swap i and j: what was at i is now home; what was at j waits at i for its turn.
        const [a, b] = [this.chunkOf(i), this.chunkOf(j)];
        const [ia, jb] = [i & CHUNK_MASK, j & CHUNK_MASK];
        scratch.set(a.words.subarray(ia * stride, ia * stride + stride));
        a.words.set(b.words.subarray(jb * stride, jb * stride + stride), ia * stride);
        b.words.set(scratch, jb * stride);
        const scale = a.scales[ia]!;
        a.scales[ia] = b.scales[jb]!;
        b.scales[jb] = scale;
        const id = this.ids[i]!;
        this.ids[i] = this.ids[j]!;
        this.ids[j] = id;
        target[i] = target[j]!;
        target[j] = j;
      }
    }
    this.ids.forEach((id, slot) => this.slots.set(id, slot));
  }

  /**
   * Spherical k-means over sampled slots (dot product as similarity, centroids unit length):
   * k-means++ seeding, then Lloyd rounds until stable or `KMEANS_ROUNDS`. The centroids
   * come back quantised like vectors.
   */
  private kmeans(points: Int32Array, wanted: number, random: () => number): Codes {
    const d = this.dimensions;
    const stride = this.stride;
    const count = Math.min(wanted, points.length);
    const centroids: Codes = { words: new Int32Array(count * stride), scales: new Float32Array(count) };

    // k-means++: each next seed drawn with weight 1 - cos to its nearest seed (half the
    // squared distance between unit vectors).
    const closest = new Float64Array(points.length).fill(-Infinity);
    for (let c = 0; c < count; c++) {
      let pick = Math.floor(random() * points.length);
      if (c > 0) {
        let total = 0;
        for (let i = 0; i < points.length; i++) total += Math.max(0, 1 - closest[i]!);
        let target = random() * total;
        pick = 0;
        while (pick < points.length - 1 && (target -= Math.max(0, 1 - closest[pick]!)) > 0) pick++;
      }
      const seed = points[pick]!;
      const chunk = this.chunkOf(seed);
      const at = seed & CHUNK_MASK;
      centroids.words.set(chunk.words.subarray(at * stride, at * stride + stride), c * stride);
      centroids.scales[c] = chunk.scales[at]!;
      this.unpack(seed);
      for (let i = 0; i < points.length; i++) {
        const point = points[i]!;
        const s =
          chunk.scales[at]! * similarity(this.unpacked, this.chunkOf(point), point & CHUNK_MASK, stride);
        closest[i] = Math.max(closest[i]!, s);
      }
    }

    const assignment = new Int32Array(points.length).fill(-1);
    const sums = new Float64Array(count * d);
    for (let round = 0; round < KMEANS_ROUNDS; round++) {
      let changed = false;
      sums.fill(0);
      for (let i = 0; i < points.length; i++) {
        const point = points[i]!;
        const cluster = this.nearestCentroid(point, centroids);
        changed ||= cluster !== assignment[i];
        assignment[i] = cluster;
        const scale = this.chunkOf(point).scales[point & CHUNK_MASK]!;
        for (let j = 0; j < d; j++) sums[cluster * d + j]! += this.unpacked[j]! * scale;
      }
      if (!changed) break;
      for (let c = 0; c < count; c++) {
        const shape = measure(sums, c * d, d);
        // An empty cluster keeps its centroid: it may win points in the next round.
        if (shape.largest > 0) this.encode(sums, c * d, shape, centroids, c);
      }
    }
    return centroids;
  }

  /** The centroid nearest a stored vector (the first on a tie); leaves its codes in `unpacked`. */
  private nearestCentroid(slot: number, centroids: Codes): number {
    this.unpack(slot);
    let best = 0;
    let bestSimilarity = -Infinity;
    for (let c = 0; c < centroids.scales.length; c++) {
      const s = similarity(this.unpacked, centroids, c, this.stride);
      if (s > bestSimilarity) {
        best = c;
        bestSimilarity = s;
      }
    }
    return best;
  }

  private unpack(slot: number): void {
    const words = this.chunkOf(slot).words;
    const base = (slot & CHUNK_MASK) * this.stride;
    for (let j = 0; j < this.stride; j++) {
      const word = words[base + j]!;
      this.unpacked[4 * j] = (word << 24) >> 24;
      this.unpacked[4 * j + 1] = (word << 16) >> 24;
      this.unpacked[4 * j + 2] = (word << 8) >> 24;
      this.unpacked[4 * j + 3] = word >> 24;
    }
  }
}

/**
 * The k best (similarity, id) pairs seen: a min-heap whose root is the worst kept, so a
 * candidate that cannot rank costs one comparison.
 */
class Best {
  private readonly similarities: Float64Array;
  private readonly ids: string[] = [];

  constructor(private readonly capacity: number) {
    this.similarities = new Float64Array(capacity);
  }

  get full(): boolean {
    return this.ids.length === this.capacity;
  }

  admits(similarity: number, id: string): boolean {
    return !this.full || outranks(similarity, id, this.similarities[0]!, this.ids[0]!);
  }

  add(similarity: number, id: string): void {
    if (!this.full) {
      let at = this.ids.length;
      this.ids.push(id);
      while (at > 0) {
        const parent = (at - 1) >> 1;
        if (!outranks(this.similarities[parent]!, this.ids[parent]!, similarity, id)) break;
        this.similarities[at] = this.similarities[parent]!;
        this.ids[at] = this.ids[parent]!;
        at = parent;
      }
      this.similarities[at] = similarity;
      this.ids[at] = id;
      return;
    }
    let at = 0;
    for (;;) {
      let worst = at;
      let worstSimilarity = similarity;
      let worstId = id;
      for (let child = 2 * at + 1; child <= 2 * at + 2 && child < this.capacity; child++) {
        if (outranks(worstSimilarity, worstId, this.similarities[child]!, this.ids[child]!)) {
          worst = child;
          worstSimilarity = this.similarities[child]!;
          worstId = this.ids[child]!;
        }
      }
      if (worst === at) break;
      this.similarities[at] = worstSimilarity;
      this.ids[at] = worstId;
      at = worst;
    }
    this.similarities[at] = similarity;
    this.ids[at] = id;
  }

  sorted(): Neighbour[] {
    return this.ids
      .map((id, i) => ({ id, similarity: this.similarities[i]! }))
      .sort((a, b) => b.similarity - a.similarity || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
      .map(({ id, similarity }) => ({
        id,
        // Quantisation error can carry a near-duplicate just past ±1.
        similarity: Math.min(1, Math.max(-1, similarity)),
      }));
  }
}

/** Whether a ranks before b: more similar, or as similar with the smaller id. */
function outranks(similarityA: number, idA: string, similarityB: number, idB: string): boolean {
  return similarityA > similarityB || (similarityA === similarityB && idA < idB);
}

/** Entry `index` of `codes` against an unpacked integer query, dequantised by the entry's scale. */
function similarity(query: Int32Array, codes: Codes, index: number, stride: number): number {
  return codes.scales[index]! * dot(query, codes.words, index * stride, stride);
}

/**
 * Σ query[i] · code[i] over packed codes, in exact int32 arithmetic (the constructor bounds
 * the query so neither sum can overflow). Unpacking a word with shifts is cheaper in V8 than
 * four byte loads, and two sums let the multiplies overlap: this loop is the cost of a search.
 */
function dot(query: Int32Array, words: Int32Array, base: number, stride: number): number {
  let even = 0;
  let odd = 0;
  for (let i = 0, j = base, end = base + stride; j < end; i += 4, j++) {
    const word = words[j]!;
    even =
      (even + Math.imul(query[i]!, (word << 24) >> 24) + Math.imul(query[i + 1]!, (word << 16) >> 24)) | 0;
    odd = (odd + Math.imul(query[i + 2]!, (word << 8) >> 24) + Math.imul(query[i + 3]!, word >> 24)) | 0;
  }
  return even + odd;
}

/** Pack unpacked codes (-127…127) four to a word, lowest dimension in the lowest byte. */
function pack(unpacked: Int32Array, words: Int32Array, base: number): void {
  for (let j = 0; j < unpacked.length / 4; j++) {
    words[base + j] =
      (unpacked[4 * j]! & 255) |
      ((unpacked[4 * j + 1]! & 255) << 8) |
      ((unpacked[4 * j + 2]! & 255) << 16) |
      (unpacked[4 * j + 3]! << 24);
  }
}

/** Largest magnitude and Euclidean length, scaled by the largest first so nothing under- or overflows. */
function measure(values: ArrayLike<number>, offset: number, d: number): Shape {
  let largest = 0;
  for (let i = 0; i < d; i++) largest = Math.max(largest, Math.abs(values[offset + i]!));
  if (largest === 0) return { largest, norm: 0 };
  let squares = 0;
  for (let i = 0; i < d; i++) squares += (values[offset + i]! / largest) ** 2;
  return { largest, norm: largest * Math.sqrt(squares) };
}

/** Index of the largest value (the first on a tie). */
function nearest(closeness: Float64Array): number {
  let best = 0;
  for (let i = 1; i < closeness.length; i++) if (closeness[i]! > closeness[best]!) best = i;
  return best;
}

function resizedList(members: Int32Array, capacity: number): Int32Array {
  const next = new Int32Array(capacity);
  next.set(members);
  return next;
}

/** `count` distinct slots of 0 … n - 1 in random order (a partial Fisher–Yates shuffle). */
function sampleSlots(n: number, count: number, random: () => number): Int32Array {
  const slots = new Int32Array(n);
  for (let i = 0; i < n; i++) slots[i] = i;
  for (let i = 0; i < count; i++) {
    const j = i + Math.floor(random() * (n - i));
    const chosen = slots[j]!;
    slots[j] = slots[i]!;
    slots[i] = chosen;
  }
  return slots.slice(0, count);
}

/** mulberry32: a small seeded generator, so training (and a test's vectors) is reproducible. */
export function seededRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) | 0;
    let t = Math.imul(state ^ (state >>> 15), 1 | state);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
