import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_QUERY_TERMS } from '../../core/recall';
import { terms } from '../../core/text';
import { startTestEnv, type TestEnv } from '../support/env';

/**
 * What one call may cost the store, whatever its caller sends: a long query is cut to the
 * terms recall reads, ranks and logs (core/recall.ts `MAX_QUERY_TERMS`), so it can neither
 * multiply a recall's reads nor the next night's refresh work.
 */
let env: TestEnv;

beforeAll(async () => {
  env = await startTestEnv();
});
afterAll(async () => {
  await env?.close();
});

describe('the work of one recall', () => {
  it('reads and logs at most MAX_QUERY_TERMS terms of a query of 2,000 single CJK characters', async () => {
    const agentId = env.agent('long-query');
    // 2,000 distinct ideographs a space apart (3,999 characters), each a term of its own; the
    // entry holds the first of them.
    const query = Array.from({ length: 2_000 }, (_, i) => String.fromCodePoint(0x4e00 + i)).join(' ');
    expect(query.length).toBeLessThanOrEqual(4_000);
    expect(terms(query).length).toBeGreaterThan(10 * MAX_QUERY_TERMS);
    const head = query.slice(0, 8);
    await env.client.write({ agentId, entries: [{ text: `倉庫 ${head}` }] });
    for (const deep of [false, true]) {
      const { hits } = await env.client.recall({ agentId, query, deep });
      expect(hits).toHaveLength(1);
    }
    const logged = await env.store.queries.find({ agentId }).toArray();
    expect(logged).toHaveLength(2);
    for (const record of logged) expect(record.terms).toEqual(terms(query).slice(0, MAX_QUERY_TERMS));
  });
});
