import { describe, expect, it } from 'vitest';
import { evictEntry } from '../../store/nightly';
import {
  impossibleQueries,
  impossibleReport,
  MAX_IMPOSSIBLE_QUERIES,
  UNKNOWN_REASON,
} from '../../store/impossible';
import { dayOf } from '../../core/salience';
import { runMemgate } from '../support/cli';
import { useTestEnv } from '../support/env';
import type { EvictionInput } from '../../core/eviction';

const env = useTestEnv();

/** The two-key check's facts of a dead entry (the reason is what the test groups by). */
const DEAD: EvictionInput = {
  reclaimFloor: 0.05,
  gateThreshold: 0.15,
  gated: true,
  reachable: true,
  refreshWindowElapsed: true,
  subsumedLosslessly: true,
  lossySummaryFlagged: false,
  livePolicy: 'capacity',
};

async function writeAndDelete(agentId: string, texts: string[], reason: string): Promise<string[]> {
  const { entries } = await env.client.write({
    agentId,
    entries: texts.map((text) => ({ text, kind: 'fact' as const })),
  });
  const ids = entries.map((e) => e.id);
  const stored = await env.store.hot.find({ _id: { $in: ids } }).toArray();
  const run = { agentId, asOf: Date.now(), runId: `impossible-${agentId}` };
  for (const [rank, entry] of stored.entries()) {
    await evictEntry(env.store, run, entry, {
      id: entry._id,
      action: 'evict',
      why: reason,
      rank,
      inputs: DEAD,
    });
  }
  return ids;
}

describe('what became impossible, live', () => {
  it('reports deep recalls that matched deleted evidence, grouped by deletion reason, per agent', async () => {
    await writeAndDelete(
      'imp-a',
      ["The supplier's notice period is 30 days."],
      'dead: window elapsed, subsumed',
    );
    await writeAndDelete('imp-a', ['The supplier invoice is due on the 5th.'], 'erasure request');
    await writeAndDelete('imp-b', ['The supplier moved to Lyon.'], 'erasure request');
    await env.client.write({ agentId: 'imp-a', entries: [{ text: 'The supplier is Acme.' }] });

    await env.client.recall({ agentId: 'imp-a', query: 'supplier notice period', deep: true });
    await env.client.recall({ agentId: 'imp-a', query: 'supplier invoice', deep: true });
    // Default recall reports no tombstones, and a deep recall that misses nothing is not impossible.
    await env.client.recall({ agentId: 'imp-a', query: 'supplier notice' });
    await env.client.recall({ agentId: 'imp-a', query: 'Acme', deep: true });
    await env.client.recall({ agentId: 'imp-b', query: 'supplier Lyon', deep: true });

    const { groups } = await impossibleQueries(env.store, { agentId: 'imp-a' });
    expect(groups.map((g) => g.reason).sort()).toEqual(['dead: window elapsed, subsumed', 'erasure request']);
    const dead = groups.find((g) => g.reason.startsWith('dead'))!;
    expect(dead.tombstones).toBe(1);
    expect(dead.queries.map((q) => q.query).sort()).toEqual(['supplier invoice', 'supplier notice period']);
    const erasure = groups.find((g) => g.reason === 'erasure request')!;
    expect(erasure.queries.every((q) => q.agentId === 'imp-a')).toBe(true);
    expect(erasure.queries.map((q) => q.query).sort()).toEqual([
      'supplier invoice',
      'supplier notice period',
    ]);

    const { groups: all } = await impossibleQueries(env.store);
    expect(
      all
        .find((g) => g.reason === 'erasure request')!
        .queries.map((q) => q.agentId)
        .sort(),
    ).toEqual(['imp-a', 'imp-a', 'imp-b']);
  });

  it('names a matched tombstone that is gone instead of dropping the query', async () => {
    const [id] = await writeAndDelete('imp-c', ['The rate limit is 600 requests per minute.'], 'capacity');
    await env.client.recall({ agentId: 'imp-c', query: 'rate limit', deep: true });
    await env.store.tombstones.deleteOne({ _id: id! });
    const { groups } = await impossibleQueries(env.store, { agentId: 'imp-c' });
    expect(groups).toHaveLength(1);
    expect(groups[0]!.reason).toBe(UNKNOWN_REASON);
  });

  it('lists the newest MAX_IMPOSSIBLE_QUERIES queries and counts the older ones', async () => {
    const [id] = await writeAndDelete('imp-d', ['The dock closes at six.'], 'capacity');
    const T0 = Date.UTC(2026, 0, 1);
    const records = Array.from({ length: MAX_IMPOSSIBLE_QUERIES + 3 }, (_, i) => ({
      _id: `imp-d-q${i}`,
      agentId: 'imp-d',
      query: `dock closing ${i}`,
      terms: ['dock', 'closing'],
      at: T0 + i,
      day: dayOf(T0 + i),
      deep: true,
      k: 10,
      hitIds: [],
      missingIds: [id!],
    }));
    for (let i = 0; i < records.length; i += 500)
      await env.store.queries.insertMany(records.slice(i, i + 500));
    const report = await impossibleReport(env.store, { agentId: 'imp-d' });
    expect(report).toMatchObject({ agentId: 'imp-d', queries: MAX_IMPOSSIBLE_QUERIES, omitted: 3 });
    const listed = report.groups.flatMap((g) => g.queries.map((q) => q.at));
    expect(Math.min(...listed)).toBe(T0 + 3);
  });

  it('`memgate impossible --agent` prints the same report', async () => {
    const { stdout } = await runMemgate(env, ['impossible', '--agent', 'imp-b']);
    const printed = JSON.parse(stdout);
    expect(printed).toMatchObject({
      agentId: 'imp-b',
      queries: 1,
      groups: [{ reason: 'erasure request', tombstones: 1 }],
    });
    expect(printed.groups[0].queries[0].query).toBe('supplier Lyon');
  });
});
