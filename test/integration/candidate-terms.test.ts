import { describe, expect, it } from 'vitest';
import { buildEntry, memoryPolicy } from '../../core/entry';
import { MAX_TERM_READS } from '../../core/recall';
import { terms } from '../../core/text';
import { findCandidates, insertNewEntries } from '../../store/entries';
import { useTestEnv } from '../support/env';
import { episode } from '../support/memories';

/**
 * The query terms recall reads for candidates (core/recall.ts, candidateTerms): at most
 * MAX_TERM_READS of them, rarest first. A word the agent never wrote has no postings: it
 * must not take the read of one it did.
 */
const env = useTestEnv();

describe("recall's reads by term", () => {
  it('reads on past words that hold no entry, so a long question still finds the one word the agent wrote', async () => {
    const agentId = env.agent('unused-words');
    const entry = buildEntry(
      `${agentId}/e1`,
      agentId,
      episode('Zoning permit approved.', Date.now()),
      memoryPolicy(env.config),
    );
    await insertNewEntries(env.store, [entry]);
    const query = terms(
      'what did the architect say about the plan, budget, contractor, deadline, inspection, materials and zoning',
    );
    // The agent's word sorts last of more than MAX_TERM_READS uncounted ones.
    expect(query.length).toBeGreaterThan(MAX_TERM_READS);
    expect([...query].sort().at(-1)).toBe(terms('zoning')[0]);
    for (const deep of [false, true]) {
      const found = await findCandidates(env.store, { agentId, terms: query, now: Date.now(), deep });
      expect(
        found.map((c) => c.entry._id),
        `deep: ${deep}`,
      ).toEqual([entry._id]);
    }
  });
});
