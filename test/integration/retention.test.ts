import { describe, expect, it } from 'vitest';
import { DAY_MS, dayOf, HOUR_MS } from '../../core/salience';
import { useTestEnv } from '../support/env';
import { expectVerified } from '../support/verify';

/** The query log keeps a recall for MEMGATE_QUERY_LOG_RETENTION_DAYS; the nightly run drops older ones. */
const T0 = Date.UTC(2025, 3, 7);
const dayAt = (day: number, hour: number) => T0 + day * DAY_MS + hour * HOUR_MS;

const env = useTestEnv({ MEMGATE_QUERY_LOG_RETENTION_DAYS: '3' });

const loggedDays = async (agentId: string) =>
  (await env.store.queries.find({ agentId }).toArray()).map((q) => q.day - dayOf(T0)).sort((a, b) => a - b);

describe('query-log retention', () => {
  it('each night drops the recalls older than the retention, after reading them', async () => {
    const agentId = env.agent('retention');
    await env.client.write({
      agentId,
      entries: [{ text: 'The courier leaves from dock 7.', salience: 0.9, writtenAt: dayAt(0, 8) }],
    });
    for (let day = 0; day < 6; day++) {
      await env.client.recall({ agentId, query: 'courier dock', asOf: dayAt(day, 12) });
    }
    expect(await loggedDays(agentId)).toEqual([0, 1, 2, 3, 4, 5]);

    await env.client.consolidate({ agentId, asOf: dayAt(6, 3) });
    expect(await loggedDays(agentId)).toEqual([3, 4, 5]);

    // The next night cuts from where this one did.
    await env.client.recall({ agentId, query: 'courier dock', asOf: dayAt(7, 12) });
    await env.client.consolidate({ agentId, asOf: dayAt(8, 3) });
    expect(await loggedDays(agentId)).toEqual([5, 7]);
    await expectVerified(env, agentId);
  }, 300_000);

  it('drops a recall logged before any night looked, however far back its asOf', async () => {
    const agentId = env.agent('retention-far-back');
    await env.client.write({
      agentId,
      entries: [{ text: 'The courier leaves from dock 7.', salience: 0.9, writtenAt: dayAt(0, 8) }],
    });
    // No night yet: nothing bounds how far back it may look, but the first night drops it.
    await env.client.recall({ agentId, query: 'courier dock', asOf: dayAt(-400, 12) });
    await env.client.recall({ agentId, query: 'courier dock', asOf: dayAt(0, 12) });
    expect(await loggedDays(agentId)).toEqual([-400, 0]);
    await env.client.consolidate({ agentId, asOf: dayAt(1, 3) });
    expect(await loggedDays(agentId)).toEqual([0]);
    await expectVerified(env, agentId);
  }, 300_000);

  it('refuses an asOf older than the last night kept, and logs nothing of it', async () => {
    const agentId = env.agent('retention-refused');
    await env.client.write({
      agentId,
      entries: [{ text: 'The courier leaves from dock 7.', salience: 0.9, writtenAt: dayAt(0, 8) }],
    });
    await env.client.consolidate({ agentId, asOf: dayAt(6, 3) });
    // That night kept days 3 and after (a retention of 3 days).
    await expect(
      env.client.recall({ agentId, query: 'courier dock', asOf: dayAt(2, 23) }),
    ).rejects.toMatchObject({ type: 'InvalidInput', issues: [{ path: 'asOf' }] });
    await env.client.recall({ agentId, query: 'courier dock', asOf: dayAt(3, 0) });
    expect(await loggedDays(agentId)).toEqual([3]);
  }, 300_000);
});
