import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LifecycleClient } from '../../client/lifecycle';
import { DAY_MS, HOUR_MS } from '../../core/salience';
import { startTestEnv, type TestEnv } from '../support/env';
import { expectVerified } from '../support/verify';

/**
 * A summary stands for current facts only: a fact superseded the same night is not merged
 * with the fact that supersedes it into one summary that keeps the old value in default
 * recall (the night supersedes before it consolidates).
 */
const T0 = Date.UTC(2025, 9, 1);
const dayAt = (day: number, hour: number) => T0 + day * DAY_MS + hour * HOUR_MS;

let env: TestEnv;
let lifecycle: LifecycleClient;

beforeAll(async () => {
  env = await startTestEnv();
  lifecycle = new LifecycleClient(env.client.temporal, env.config);
});
afterAll(async () => {
  await env?.close();
});

describe('summaries of superseded facts', () => {
  it('two values of one attribute written the same day: default recall answers only the newer', async () => {
    const agentId = env.agent('same-night-supersession');
    const fact = (days: number, hour: number) => ({
      text: `The supplier's contractual notice period is ${days} days.`,
      kind: 'fact' as const,
      salience: 0.9,
      subject: 'supplier',
      attribute: 'notice period',
      writtenAt: dayAt(0, hour),
    });
    const { entries } = await env.client.write({ agentId, entries: [fact(14, 9), fact(30, 10)] });
    const [older, newer] = entries.map((e) => e.id) as [string, string];
    const report = await lifecycle.consolidate({ agentId, asOf: dayAt(1, 3) });
    expect(report.counts.superseded).toBe(1);
    expect(await env.store.hot.findOne({ _id: older })).toMatchObject({
      isActive: false,
      supersededBy: newer,
    });

    const { hits } = await env.client.recall({
      agentId,
      query: "What is the supplier's notice period?",
      asOf: dayAt(1, 9),
    });
    expect(hits.map((h) => h.id)).toContain(newer);
    for (const hit of hits) expect(hit.text, hit.id).not.toContain('14 days');
    expect(await env.store.hot.countDocuments({ agentId, kind: 'summary', derivedFrom: older })).toBe(0);
    await expectVerified(env, agentId);
  }, 300_000);
});
