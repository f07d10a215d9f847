import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { agentIdSchema } from '../../core/entry';
import { entryIdSchema } from '../../core/messages';
import { forgetWorkflowId } from '../../workflows/forget';
import { restoreWorkflowId } from '../../workflows/restore';

/** Ids as the schemas take them, `-` (which both may hold) made likely. */
const agentId = fc
  .stringMatching(/^[A-Za-z0-9][a-z0-9._:-]{0,12}$/)
  .filter((id) => agentIdSchema.safeParse(id).success);
const entryId = fc.stringMatching(/^[a-z0-9_-]{1,12}$/).filter((id) => entryIdSchema.safeParse(id).success);
const pair = fc.tuple(agentId, entryId);

describe('workflow ids of an agent’s entry', () => {
  for (const [name, idOf] of [
    ['forget', forgetWorkflowId],
    ['restore', restoreWorkflowId],
  ] as const) {
    it(`${name}: two (agent, entry) pairs never share one`, () => {
      fc.assert(
        fc.property(pair, pair, ([a1, e1], [a2, e2]) => {
          fc.pre(a1 !== a2 || e1 !== e2);
          expect(idOf(a1, e1)).not.toBe(idOf(a2, e2));
        }),
      );
      // The pair the review found: agent `a-b` with entry `c`, agent `a` with entry `b-c`.
      expect(idOf('a-b', 'c')).not.toBe(idOf('a', 'b-c'));
    });
  }
});
