import { Context } from '@temporalio/activity';
import { agentIdSchema, buildEntry, memoryPolicy, type WriteRequest } from '../core/entry';
import { policySchema, type Policy } from '../core/policy';
import { parseInput } from '../core/messages';
import { registerAgent } from '../store/agents';
import type { Store } from '../store/db';
import { entryId, insertNewEntries } from '../store/entries';
import type { PersistedEntry } from '../core/messages';

/** Soft writes: validated upstream, stored as-is, no model call (README, The write path). */
export function createWriteActivities(store: Store) {
  return {
    /** The agent joins the nightly fan-out; idempotent. */
    async registerAgent(agentId: string): Promise<void> {
      agentId = parseInput(agentIdSchema, agentId, 'agent id');
      await registerAgent(store, agentId, Date.now());
    },

    /** Persist one batch; each request's entries come back in order with their ids. */
    /**
     * Under the policy the agent's workflow read (docs/invariants.md, One policy), not this
     * worker's settings.
     */
    async persistWrites(requests: WriteRequest[], stored: Policy): Promise<PersistedEntry[][]> {
      const policy = memoryPolicy(parseInput(policySchema, stored, 'policy'));
      const built = requests.map((req) =>
        req.entries.map((e) => {
          const writtenAt = e.writtenAt!;
          const id = entryId(
            req.agentId,
            e.idempotencyKey
              ? { idempotencyKey: e.idempotencyKey }
              : { text: e.text, source: e.source, writtenAt },
          );
          return buildEntry(id, req.agentId, { ...e, writtenAt }, policy);
        }),
      );
      const status = await insertNewEntries(store, built.flat());
      const acknowledged = Context.current().metricMeter.createCounter(
        'memgate_write_entries',
        'entries',
        'entries the write path acknowledged, by status (created, existing, deleted)',
      );
      for (const s of status.values()) acknowledged.add(1, { status: s });
      return built.map((entries) => entries.map((e) => ({ id: e._id, status: status.get(e._id)! })));
    },
  };
}
