import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestEnv, type TestEnv } from '../support/env';

let env: TestEnv;
beforeAll(async () => {
  env = await startTestEnv();
});
afterAll(async () => {
  await env?.close();
});

describe('durable soft writes and gated recall', () => {
  it('round-trips a write through the agent workflow into recall', async () => {
    const res = await env.client.write({
      agentId: 'agent-rt',
      entries: [
        { text: "The supplier's contractual notice period is 30 days.", kind: 'fact', salience: 0.9 },
      ],
    });
    expect(res.entries).toHaveLength(1);
    expect(res.entries[0]!.status).toBe('created');
    const { hits } = await env.client.recall({ agentId: 'agent-rt', query: 'supplier notice period' });
    expect(hits.map((h) => h.id)).toEqual([res.entries[0]!.id]);
    expect(hits[0]!.text).toContain('30 days');
    expect(hits[0]!.dormant).toBe(false);
  });
});
