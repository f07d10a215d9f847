import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DAY_MS, HOUR_MS } from '../../core/salience';
import { untilEmbedded } from '../support/embedded';
import { startTestEnv, type TestEnv } from '../support/env';
import { MEMORIES, PARAPHRASE } from '../support/memories';

/**
 * Default recall's filter applied inside the nearest-neighbour search (docs/recall.md, The
 * engine in memgate), against the real stack: the state kept beside each vector follows its
 * entry through the night, so a spilled entry is rejected by the search itself, never read,
 * and found again once the night brings it back.
 */
const T0 = Date.UTC(2025, 5, 1);
const dayAt = (day: number, hour: number) => T0 + day * DAY_MS + hour * HOUR_MS;

let env: TestEnv;
beforeAll(async () => {
  // Four hot entries at most: the night spills the oldest of six to cold.
  env = await startTestEnv({ MEMGATE_HOT_CAPACITY: '4', MEMGATE_LOW_WATERMARK: '0.5' });
});
afterAll(async () => {
  await env?.close();
});

const stateOf = async (agentId: string, id: string) =>
  (await env.store.vectors.findOne({ _id: id, agentId }))?.recall;

describe('the recall state beside each vector', () => {
  it('follows its entry to cold and back, and the search filters on it', async () => {
    const agentId = env.agent('spilled');
    const { entries } = await env.client.write({
      agentId,
      // The paraphrase's fact is the oldest: reclaim spills it first.
      entries: MEMORIES.map((text, i) => ({ text, salience: 0.9, writtenAt: dayAt(0, 8 + i) })),
    });
    const ids = entries.map((e) => e.id);
    const fact = ids[0]!;
    await untilEmbedded(env.store, agentId, ids);
    expect(await stateOf(agentId, fact)).toMatchObject({ tier: 'hot', isActive: true });

    const night = await env.client.consolidate({ agentId, asOf: dayAt(1, 3) });
    expect(night.counts.spilled).toBeGreaterThan(0);
    expect(await env.store.cold.countDocuments({ _id: fact })).toBe(1);
    expect(await stateOf(agentId, fact)).toMatchObject({ tier: 'cold' });

    const gated = await env.client.recall({ agentId, query: PARAPHRASE, asOf: dayAt(1, 12) });
    expect(gated.hits.map((h) => h.id)).not.toContain(fact);
    expect(gated.retrieval).toMatchObject({ mode: 'hybrid' });
    // Its vector was found and rejected inside the search, with the other spilled ones.
    expect(gated.retrieval.mode === 'hybrid' && gated.retrieval.filteredNeighbours).toBeGreaterThanOrEqual(1);

    // Read back from cold, it returns to hot at the next night, and its state with it.
    const deep = await env.client.recall({
      agentId,
      query: 'favourite colour',
      deep: true,
      asOf: dayAt(1, 12),
    });
    expect(deep.hits[0]?.id).toBe(fact);
    await env.client.consolidate({ agentId, asOf: dayAt(2, 3) });
    const events = await env.store.ledger.find({ agentId, entryId: fact }).toArray();
    expect(events.map((e) => e.event)).toEqual(['spill', 'rehydrate']);
    expect(await env.store.hot.countDocuments({ _id: fact })).toBe(1);
    expect(await stateOf(agentId, fact)).toMatchObject({ tier: 'hot' });
    const again = await env.client.recall({ agentId, query: PARAPHRASE, asOf: dayAt(2, 12) });
    expect(again.hits[0]).toMatchObject({ id: fact, foundBy: 'semantic' });
  }, 300_000);
});
