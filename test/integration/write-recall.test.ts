import type { WorkflowHandle } from '@temporalio/client';
import { describe, expect, it } from 'vitest';
import { DAY_MS, HOUR_MS } from '../../core/salience';
import { InvalidInputError } from '../../core/errors';
import { untilEmbedded } from '../support/embedded';
import { useTestEnv } from '../support/env';

const env = useTestEnv();

describe('durable soft writes and gated recall', () => {
  it('round-trips a write through the agent workflow into recall', async () => {
    const res = await env.client.write({
      agentId: env.agent('agent-rt'),
      entries: [
        { text: "The supplier's contractual notice period is 30 days.", kind: 'fact', salience: 0.9 },
      ],
    });
    expect(res.entries).toHaveLength(1);
    expect(res.entries[0]!.status).toBe('created');
    const { hits } = await env.client.recall({
      agentId: env.agent('agent-rt'),
      query: 'supplier notice period',
    });
    expect(hits.map((h) => h.id)).toEqual([res.entries[0]!.id]);
    expect(hits[0]!.text).toContain('30 days');
    expect(hits[0]!.dormant).toBe(false);
    expect(hits[0]!.tier).toBe('hot');
    const stored = await env.store.hot.findOne({ _id: res.entries[0]!.id });
    expect(stored?.atoms).toContain('qty:30 day');
  });

  it('acknowledges a write only once it is in MongoDB, several entries per Update', async () => {
    const res = await env.client.write({
      agentId: env.agent('agent-multi'),
      entries: [
        { text: 'alpha note about kiwis' },
        { text: 'beta note about kiwis' },
        { text: 'gamma note about kiwis' },
      ],
    });
    const ids = res.entries.map((e) => e.id);
    expect(new Set(ids).size).toBe(3);
    expect(await env.store.hot.countDocuments({ _id: { $in: ids } })).toBe(3);
  });

  it('an entry past its dormantAt is invisible to default recall and found, unchanged, by deep recall', async () => {
    const now = Date.now();
    const res = await env.client.write({
      agentId: env.agent('agent-gate'),
      entries: [
        // Written 10 days ago at 0.5: with a 72 h half-life it crossed the 0.15 gate after ~125 h.
        { text: 'The warehouse door code is 4417.', salience: 0.5, writtenAt: now - 10 * DAY_MS },
        { text: 'The warehouse opens at 7am.', salience: 0.9, writtenAt: now - HOUR_MS },
      ],
    });
    const [dormantId, liveId] = res.entries.map((e) => e.id);
    // The agent's workflow settles the entries once it has embedded them; recall must not.
    await untilEmbedded(env.store, env.agent('agent-gate'), [dormantId!, liveId!]);
    const before = await env.store.hot.findOne({ _id: dormantId });
    expect(before!.dormantAt).toBeLessThan(now);

    const shallow = await env.client.recall({
      agentId: env.agent('agent-gate'),
      query: 'warehouse door code',
    });
    expect(shallow.hits.map((h) => h.id)).toEqual([liveId]);

    const deep = await env.client.recall({
      agentId: env.agent('agent-gate'),
      query: 'warehouse door code',
      deep: true,
    });
    const hit = deep.hits.find((h) => h.id === dormantId);
    expect(hit).toMatchObject({ dormant: true, tier: 'hot', text: 'The warehouse door code is 4417.' });
    expect(hit!.salience).toBeLessThan(env.config.gateThreshold);
    expect(deep.missing).toEqual([]);

    // Reading is not a lifecycle event (docs/invariants.md, Read-only recall): the documents
    // are byte-for-byte what they were.
    expect(await env.store.hot.findOne({ _id: dormantId })).toEqual(before);
    expect(await env.store.queries.countDocuments({ agentId: env.agent('agent-gate') })).toBe(2);
  });

  it('evaluates the gate at asOf: the same entry was visible when written and is dormant a month later', async () => {
    // asOf is bounded as a write's time is (not past the clock): the month is in the past.
    const writtenAt = Date.now() - 30 * DAY_MS;
    const res = await env.client.write({
      agentId: env.agent('agent-asof'),
      entries: [{ text: 'Quarterly offsite in Lisbon', salience: 0.6, writtenAt }],
    });
    const id = res.entries[0]!.id;
    const then = await env.client.recall({
      agentId: env.agent('agent-asof'),
      query: 'offsite Lisbon',
      asOf: writtenAt + 60_000,
    });
    expect(then.hits.map((h) => h.id)).toEqual([id]);
    const now = await env.client.recall({ agentId: env.agent('agent-asof'), query: 'offsite Lisbon' });
    expect(now.hits).toEqual([]);
  });

  it('is idempotent: the same idempotency key twice gives one entry', async () => {
    const entry = { text: 'Invoice 88 was paid on 2024-03-02', idempotencyKey: 'invoice-88-paid' };
    const first = await env.client.write({ agentId: env.agent('agent-idem'), entries: [entry] });
    const second = await env.client.write({
      agentId: env.agent('agent-idem'),
      entries: [{ ...entry, text: 'Invoice 88 was paid on 2024-03-02.' }],
    });
    expect(second.entries[0]!.id).toBe(first.entries[0]!.id);
    expect(first.entries[0]!.status).toBe('created');
    expect(second.entries[0]!.status).toBe('existing');
    expect(await env.store.hot.countDocuments({ agentId: env.agent('agent-idem') })).toBe(1);
    // The same key twice inside one write is one entry as well.
    const dup = await env.client.write({
      agentId: env.agent('agent-idem'),
      entries: [
        { text: 'x y z', idempotencyKey: 'k2' },
        { text: 'x y z', idempotencyKey: 'k2' },
      ],
    });
    expect(dup.entries[0]!.id).toBe(dup.entries[1]!.id);
    expect(await env.store.hot.countDocuments({ agentId: env.agent('agent-idem') })).toBe(2);
  });

  it("starts the agent's workflow again when it was closed after this client saw it running", async () => {
    const agentId = env.agent('agent-restart');
    await env.client.write({ agentId, entries: [{ text: 'first memory about ferns' }] });
    await env.client.temporal.workflow.getHandle(`memgate-agent-${agentId}`).terminate('operator closed it');
    const res = await env.client.write({ agentId, entries: [{ text: 'second memory about ferns' }] });
    expect(res.entries[0]!.status).toBe('created');
    const { hits } = await env.client.recall({ agentId, query: 'ferns' });
    expect(hits.map((h) => h.text).sort()).toEqual(['first memory about ferns', 'second memory about ferns']);
  });

  it('does not resurrect an erased entry when the same write is replayed (docs/invariants.md, Erasure wins)', async () => {
    const agentId = env.agent('agent-erase');
    const entry = { text: 'My home address is 12 Elm Street', idempotencyKey: 'address' };
    const [written] = (await env.client.write({ agentId, entries: [entry] })).entries;
    await env.client.forget({ agentId, entryId: written!.id });
    const [replayed] = (await env.client.write({ agentId, entries: [entry] })).entries;
    expect(replayed).toEqual({ id: written!.id, status: 'deleted' });
    expect(await env.store.hot.countDocuments({ agentId })).toBe(0);
    expect(await env.store.cold.countDocuments({ agentId })).toBe(0);
  });

  it('isolates tenants: agent A never sees agent B', async () => {
    await env.client.write({
      agentId: env.agent('tenant-a'),
      entries: [{ text: 'Secret launch codename is Bluebird' }],
    });
    await env.client.write({
      agentId: env.agent('tenant-b'),
      entries: [{ text: 'Public launch codename is Redwing' }],
    });
    for (const deep of [false, true]) {
      const a = await env.client.recall({ agentId: env.agent('tenant-a'), query: 'launch codename', deep });
      expect(a.hits.map((h) => h.text)).toEqual(['Secret launch codename is Bluebird']);
      const b = await env.client.recall({ agentId: env.agent('tenant-b'), query: 'launch codename', deep });
      expect(b.hits.map((h) => h.text)).toEqual(['Public launch codename is Redwing']);
    }
  });
});

/**
 * The Update events in a workflow's history. A rejected Update must leave none; the server's
 * own workflow-task events (a task that timed out on a busy machine, the agent's embedding
 * after a write) may come and go around it and say nothing about the Update.
 */
async function updateEvents(handle: WorkflowHandle): Promise<string[]> {
  const { events } = await handle.fetchHistory();
  return (events ?? []).flatMap((e) =>
    Object.keys(e).filter((k) => k.startsWith('workflowExecutionUpdate') && e[k as keyof typeof e]),
  );
}

describe('bad input gets a typed error and leaves the store unchanged', () => {
  const long = 'x'.repeat(16_001);
  const cases: [string, (agentId: unknown) => unknown][] = [
    ['empty text', (agentId) => ({ agentId, entries: [{ text: '' }] })],
    ['blank text', (agentId) => ({ agentId, entries: [{ text: '   ' }] })],
    ['oversized text', (agentId) => ({ agentId, entries: [{ text: long }] })],
    ['salience 0', (agentId) => ({ agentId, entries: [{ text: 'ok', salience: 0 }] })],
    ['salience above 1', (agentId) => ({ agentId, entries: [{ text: 'ok', salience: 1.01 }] })],
    ['salience NaN', (agentId) => ({ agentId, entries: [{ text: 'ok', salience: NaN }] })],
    ['agentId an object', () => ({ agentId: { $ne: null }, entries: [{ text: 'ok' }] })],
    ['agentId with $', () => ({ agentId: '$where', entries: [{ text: 'ok' }] })],
    ['unknown entry field', (agentId) => ({ agentId, entries: [{ text: 'ok', $set: { isActive: false } }] })],
    ['unknown request field', (agentId) => ({ agentId, entries: [{ text: 'ok' }], tier: 'cold' })],
    ['no entries', (agentId) => ({ agentId, entries: [] })],
    [
      'batch over the size limit',
      (agentId) => ({ agentId, entries: Array.from({ length: 101 }, (_, i) => ({ text: `e${i}` })) }),
    ],
    [
      'freshUntil on a non-volatile entry',
      (agentId) => ({ agentId, entries: [{ text: 'ok', freshUntil: 5 }] }),
    ],
  ];

  it.each(cases)('client rejects %s', async (_name, makeRequest) => {
    const request = makeRequest(env.agent('bad'));
    const before = await env.store.hot.countDocuments({});
    await expect(env.client.write(request as never)).rejects.toBeInstanceOf(InvalidInputError);
    expect(await env.store.hot.countDocuments({})).toBe(before);
  });

  it.each(cases)(
    'the workflow Update validator rejects %s before it reaches history',
    async (_name, makeRequest) => {
      const request = makeRequest(env.agent('bad'));
      // Bypass the client's own check: send the raw Update to a running agent workflow.
      await env.client.write({
        agentId: env.agent('bad'),
        entries: [{ text: 'warm-up so the workflow exists', idempotencyKey: 'warm' }],
      });
      const handle = env.client.temporal.workflow.getHandle(`memgate-agent-${env.agent('bad')}`);
      const before = await env.store.hot.countDocuments({});
      const updatesBefore = await updateEvents(handle);
      const err = await handle.executeUpdate('write', { args: [request] }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(Error);
      expect(String((err as { cause?: { type?: string } }).cause?.type)).toBe('InvalidInput');
      expect(await env.store.hot.countDocuments({})).toBe(before);
      expect(await updateEvents(handle)).toEqual(updatesBefore);
    },
  );

  it('recall rejects a malformed query with InvalidInputError and logs nothing', async () => {
    const before = await env.store.queries.countDocuments({});
    await expect(env.client.recall({ agentId: env.agent('bad'), query: '' })).rejects.toBeInstanceOf(
      InvalidInputError,
    );
    await expect(env.client.recall({ agentId: { $gt: '' } as never, query: 'x' })).rejects.toBeInstanceOf(
      InvalidInputError,
    );
    await expect(
      env.client.recall({ agentId: env.agent('bad'), query: 'hello', k: 0 }),
    ).rejects.toBeInstanceOf(InvalidInputError);
    expect(await env.store.queries.countDocuments({})).toBe(before);
  });
});
