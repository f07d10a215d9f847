import { describe, expect, it } from 'vitest';
import { MAX_WRITE_BYTES } from '../../core/entry';
import { MAX_QUERY_TERMS, MAX_RANKED_CHARS, POSTINGS_BUDGET } from '../../core/recall';
import { terms } from '../../core/text';
import { startTestEnv, useTestEnv, type TestEnv } from '../support/env';

/**
 * What one call may cost the store, whatever its caller sends: a long query is cut to the
 * terms recall reads, ranks and logs (core/recall.ts `MAX_QUERY_TERMS`), so it can neither
 * multiply a recall's reads nor the next night's refresh work; and a recall ranks at most
 * `MAX_RANKED_CHARS` of candidate text, however long the entries its terms find.
 */
const env = useTestEnv();

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

  it('reads the document frequencies of all its terms by id, in one read however many terms it reads', async () => {
    const agentId = env.agent('fan-out');
    const query = Array.from({ length: MAX_QUERY_TERMS }, (_, i) => String.fromCodePoint(0x4e00 + i)).join(
      ' ',
    );
    await env.client.write({ agentId, entries: [{ text: `倉庫 ${query.slice(0, 8)}` }] });
    // The recall runs in this process, on the client's store: its reads of the terms' document
    // frequencies are counted, each with the ids it asks for (store/byIds.ts).
    const store = env.store as { termStats: typeof env.store.termStats };
    const termStats = store.termStats;
    const reads: { method: string; ids: number }[] = [];
    store.termStats = new Proxy(termStats, {
      get(target, prop, receiver) {
        const value: unknown = Reflect.get(target, prop, receiver);
        if (typeof value !== 'function') return value;
        const bound = (value as (...a: unknown[]) => unknown).bind(target);
        if (prop !== 'find' && prop !== 'findOne') return bound;
        return (filter: { _id?: string | { $in?: string[] } }, ...rest: unknown[]) => {
          const id = filter._id;
          reads.push({ method: prop, ids: typeof id === 'string' ? 1 : (id?.$in?.length ?? 0) });
          return bound(filter, ...rest);
        };
      },
    });
    try {
      await env.client.recall({ agentId, query, deep: true });
    } finally {
      store.termStats = termStats;
    }
    expect(reads.length).toBeGreaterThan(0);
    for (const read of reads) expect(read).toEqual({ method: 'find', ids: MAX_QUERY_TERMS });
  });

  it('ranks at most MAX_RANKED_CHARS of candidate text, and counts the candidates it left out', async () => {
    // Lexical: the words alone find the candidates, and no query waits behind the embedding
    // of megabytes of passages.
    const lexical = await startTestEnv({}, { embeddings: { unavailable: 'the ranking budget is lexical' } });
    try {
      await rankWithinBudget(lexical);
    } finally {
      await lexical.close();
    }
  });
});

async function rankWithinBudget(env: TestEnv): Promise<void> {
  const agentId = env.agent('long-candidates');
  // Entries as long as a write allows, each holding one of three words, as many of each as
  // default recall reads for one term: together more than the budget ranks.
  const words = ['cargo', 'pallet', 'crate'];
  const perWord = POSTINGS_BUDGET.default;
  const texts = words.flatMap((w) =>
    Array.from(
      { length: perWord },
      (_, i) => `${`${w} `.repeat(Math.floor(env.config.maxTextChars / (w.length + 1)) - 2)}${i}`,
    ),
  );
  const longest = Math.max(...texts.map((t) => t.length));
  expect(texts.length * longest).toBeGreaterThan(MAX_RANKED_CHARS);
  const perWrite = Math.floor(MAX_WRITE_BYTES / (longest + 200));
  for (let i = 0; i < texts.length; i += perWrite) {
    await env.client.write({ agentId, entries: texts.slice(i, i + perWrite).map((text) => ({ text })) });
  }
  for (const deep of [false, true]) {
    const result = await env.client.recall({ agentId, query: words.join(' '), deep });
    expect(result.hits).toHaveLength(10);
    expect(result.candidatesOverBudget).toBeGreaterThan(0);
    expect(result.candidates + result.candidatesOverBudget!).toBe(texts.length);
    expect(result.candidates * (longest - 10)).toBeLessThanOrEqual(MAX_RANKED_CHARS);
  }
}
