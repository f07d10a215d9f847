import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { RecallState } from '../../core/recall';
import { VectorEngine } from '../../vectorEngine/engine';
import { float16Bytes, markerVector, persistedBytes } from '../support/vectorBytes';

// The engine thread with the real usearch: what it filters, what it persists, what erasure leaves.

const DIMS = 32;
const dir = mkdtempSync(join(tmpdir(), 'vector-engine-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const engine = VectorEngine.forProcess();
let keys = 0;

const marker = (seed: number) => markerVector(seed, DIMS);

const hot = (over: Partial<RecallState> = {}): RecallState => ({
  tier: 'hot',
  isActive: true,
  dormantAt: 10_000,
  salience: { base: 0.5, at: 0 },
  ...over,
});

async function indexOf(vectors: Map<string, { vector: Float32Array; state?: RecallState }>) {
  const key = `k${keys++}`;
  await engine.request({ op: 'create', key, dimensions: DIMS });
  const ids = [...vectors.keys()];
  const matrix = new Float32Array(ids.length * DIMS);
  ids.forEach((id, i) => matrix.set(vectors.get(id)!.vector, i * DIMS));
  await engine.request({
    op: 'apply',
    key,
    upserts: ids.map((id) => ({ id, ...(vectors.get(id)!.state ? { state: vectors.get(id)!.state } : {}) })),
    vectors: matrix,
    removals: [],
  });
  return key;
}

const search = (key: string, query: Float32Array, k: number, defaultRecallAt?: number) =>
  engine.request({
    op: 'search',
    key,
    query: query.slice(),
    k,
    ...(defaultRecallAt === undefined ? {} : { defaultRecallAt }),
    sample: 256,
  });

describe('the vector engine thread', () => {
  it('applies default recall’s filter inside the search, and deep recall’s none', async () => {
    const query = marker(1);
    // All near the query, in states default recall must refuse but one.
    const near = (i: number) => Float32Array.from(query, (x, d) => x + (d === i ? 0.05 : 0));
    const vectors = new Map<string, { vector: Float32Array; state?: RecallState }>([
      ['passes', { vector: near(0), state: hot() }],
      ['cold', { vector: near(1), state: hot({ tier: 'cold' }) }],
      ['inactive', { vector: near(2), state: hot({ isActive: false }) }],
      ['dormant', { vector: near(3), state: hot({ dormantAt: 5_000 }) }],
      ['expired', { vector: near(4), state: hot({ freshUntil: 6_000 }) }],
      ['unknown', { vector: near(5) }],
      ...Array.from(
        { length: 40 },
        (_, i) =>
          [`far${i}`, { vector: marker(100 + i), state: hot() }] as [
            string,
            { vector: Float32Array; state: RecallState },
          ],
      ),
    ]);
    const key = await indexOf(vectors);
    const filtered = await search(key, query, 2, 7_000);
    // An entry with no state kept is not judged here: recall reads it and judges its entry.
    expect(filtered.neighbours.map((n) => n.id).sort()).toEqual(['passes', 'unknown']);
    // Asked for more, it passes over all four it refuses (counted) to the far ones.
    const more = await search(key, query, 10, 7_000);
    expect(more.rejected).toBe(4);
    expect(more.neighbours.map((n) => n.id)).not.toContain('cold');
    expect(more.neighbours).toHaveLength(10);
    const deep = await search(key, query, 6);
    expect(deep.neighbours.map((n) => n.id).sort()).toEqual(
      ['cold', 'dormant', 'expired', 'inactive', 'passes', 'unknown'].sort(),
    );
    expect(deep.background).toHaveLength(46);
    // Before its expiry, the volatile fact passes.
    expect((await search(key, query, 3, 5_500)).neighbours.map((n) => n.id)).toContain('expired');
  });

  it('searches again for more than the filter passed only while fewer than `enough` did', async () => {
    const query = marker(2);
    // A cluster near the query, most of it cold (the three nearest pass), and far passing
    // entries beyond it.
    const near = (i: number, by: number) => Float32Array.from(marker(500 + i), (x, d) => query[d]! + by * x);
    const entry = (vector: Float32Array, state: RecallState) => ({ vector, state });
    const vectors = new Map([
      ...Array.from({ length: 3 }, (_, i) => [`near${i}`, entry(near(i, 0.05), hot())] as const),
      ...Array.from(
        { length: 60 },
        (_, i) => [`cold${i}`, entry(near(10 + i, 0.2), hot({ tier: 'cold' }))] as const,
      ),
      ...Array.from({ length: 300 }, (_, i) => [`far${i}`, entry(marker(1000 + i), hot())] as const),
    ]);
    const key = await indexOf(vectors);
    const ids = async (enough?: number) =>
      (
        await engine.request({
          op: 'search',
          key,
          query: query.slice(),
          k: 20,
          defaultRecallAt: 7_000,
          sample: 256,
          ...(enough === undefined ? {} : { enough }),
        })
      ).neighbours.map((n) => n.id);
    // Without `enough`, it widens until k pass: the three near ones, then far ones.
    const all = await ids();
    expect(all).toHaveLength(20);
    expect(all.slice(0, 3).sort()).toEqual(['near0', 'near1', 'near2']);
    // Three of its first 40 pass: enough for 3, so no wider search; not for 4.
    expect((await ids(3)).sort()).toEqual(['near0', 'near1', 'near2']);
    expect(await ids(4)).toEqual(all);
  });

  it('keeps what it persisted, and opens it again with the same answers and states', async () => {
    const vectors = new Map(
      Array.from({ length: 300 }, (_, i) => [
        `e${i}`,
        { vector: marker(i), state: hot({ tier: i % 2 ? 'cold' : 'hot' }) },
      ]),
    );
    const key = await indexOf(vectors);
    const at = { base: join(dir, 'roundtrip') };
    await engine.request({ op: 'save', key, at, meta: { position: 7 } });
    const before = await search(key, marker(3), 10, 0);
    await engine.request({ op: 'drop', key });
    const opened = await engine.request({ op: 'open', key: 'reopened', dimensions: DIMS, at });
    expect(opened).toEqual({ size: 300, scrubs: 0, meta: { position: 7 } });
    const after = await search('reopened', marker(3), 10, 0);
    expect(after.neighbours).toEqual(before.neighbours);
    expect(after.neighbours.every((n) => Number(n.id.slice(1)) % 2 === 0)).toBe(true);
  });

  // An opened index is memory-mapped until its first change: it is loaded from its file then,
  // or from the mapping when the file is gone (replaced by a process sharing the directory).
  it.each([
    ['its file still there', false],
    ['its file gone', true],
  ])('takes changes once opened as the index it was saved from does (%s)', async (_, gone) => {
    const vectors = new Map(
      Array.from({ length: 120 }, (_, i) => [`e${i}`, { vector: marker(2000 + i), state: hot() }]),
    );
    const key = await indexOf(vectors);
    const opened = `opened-then-changed-${String(gone)}`;
    const at = { base: join(dir, opened) };
    await engine.request({ op: 'save', key, at, meta: null });
    await engine.request({ op: 'open', key: opened, dimensions: DIMS, at });
    if (gone) {
      await engine.request({ op: 'unlink', at });
      expect(readdirSync(dir).filter((f) => f.startsWith(opened))).toEqual([]);
    }
    // The same changes to both: a removal, a new vector, a changed one, a state alone.
    const change = {
      upserts: [
        { id: 'new', state: hot() },
        { id: 'e5', state: hot() },
        { id: 'e9', state: hot({ tier: 'cold' }) },
      ],
      vectors: Float32Array.from([...marker(7000), ...marker(7001), ...vectors.get('e9')!.vector]),
      removals: ['e2'],
    };
    for (const k of [key, opened])
      expect(
        await engine.request({ op: 'apply', key: k, ...change, vectors: change.vectors.slice() }),
      ).toEqual({
        size: 120,
        removed: true,
        // The removal's scrub gave its slot to the new vector.
        scrubs: 0,
      });
    for (const query of [marker(7000), marker(7001), vectors.get('e2')!.vector, vectors.get('e9')!.vector]) {
      const found = await search(opened, query, 5, 0);
      expect(found.neighbours).toEqual((await search(key, query, 5, 0)).neighbours);
    }
    const ids = (await search(opened, vectors.get('e2')!.vector, 120)).neighbours.map((n) => n.id);
    expect(ids).toContain('new');
    expect(ids).not.toContain('e2');
    expect((await search(opened, vectors.get('e9')!.vector, 1, 0)).neighbours[0]!.id).not.toBe('e9');
  });

  it('leaves no removed vector on disk: not in what it had saved, nor in any later save', async () => {
    const vectors = new Map(Array.from({ length: 200 }, (_, i) => [`e${i}`, { vector: marker(1000 + i) }]));
    const key = await indexOf(vectors);
    const at = { base: join(dir, 'erasure') };
    await engine.request({ op: 'save', key, at, meta: null });
    const erased = ['e7', 'e42', 'e199'];
    // The test can find a vector in the files: each is there before it is removed.
    for (const id of erased)
      expect(persistedBytes(at.base).includes(float16Bytes(vectors.get(id)!.vector))).toBe(true);

    const applied = await engine.request({
      op: 'apply',
      key,
      upserts: [],
      vectors: new Float32Array(0),
      removals: erased,
    });
    expect(applied).toEqual({ size: 197, removed: true, scrubs: 3 });
    // What had been saved is gone at once.
    expect(existsSync(`${at.base}.state`)).toBe(false);
    expect(persistedBytes(at.base).length).toBe(0);

    // A new vector and a changed one after the removals, then a save.
    const fresh = marker(5000);
    const changed = marker(6000);
    await engine.request({
      op: 'apply',
      key,
      upserts: [{ id: 'new' }, { id: 'e3' }],
      vectors: Float32Array.from([...fresh, ...changed]),
      removals: [],
    });
    await engine.request({ op: 'save', key, at, meta: null });
    const saved = persistedBytes(at.base);
    for (const id of [...erased, 'e3'])
      expect(saved.includes(float16Bytes(vectors.get(id)!.vector))).toBe(false);
    expect(saved.includes(float16Bytes(fresh))).toBe(true);
    expect(saved.includes(float16Bytes(changed))).toBe(true);
    const opened = await engine.request({ op: 'open', key: 'erasure-reopened', dimensions: DIMS, at });
    expect(opened?.size).toBe(198);
    const found = await search('erasure-reopened', vectors.get('e42')!.vector, 198);
    expect(found.neighbours.map((n) => n.id)).not.toContain('e42');
    expect(found.neighbours.map((n) => n.id)).toContain('new');
  });
});
