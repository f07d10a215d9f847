import { Context } from '@temporalio/activity';
import {
  agentIdSchema,
  buildEntry,
  memoryPolicy,
  type Entry,
  type WriteEntry,
  type WriteRequest,
} from '../core/entry';
import { InvalidInputError } from '../core/errors';
import { policySchema, writeLimitsOf, type Policy } from '../core/policy';
import { parseInput } from '../core/messages';
import { isSealedWrite, type WriteUpdate } from '../core/sealed';
import { openSealedWrite } from '../codec/sealedEntry';
import { registerAgent } from '../store/agents';
import { contentKeys, shredContentKey } from '../store/contentKeys';
import type { Store } from '../store/db';
import { insertNewEntries, writtenEntryId } from '../store/entries';
import type { InvalidWrite, PersistOutcome, WriteStatus } from '../core/messages';

/** The entries of a write in clear, each with the id derived from it. */
function entriesOf(req: WriteRequest, policy: ReturnType<typeof memoryPolicy>): Entry[] {
  return req.entries.map((e: WriteEntry) => {
    const writtenAt = e.writtenAt!;
    const id = writtenEntryId(req.agentId, { ...e, writtenAt });
    return buildEntry(id, req.agentId, { ...e, writtenAt }, policy);
  });
}

/** Soft writes: validated upstream, stored as-is, no model call (docs/writes.md, The write path). */
export function createWriteActivities(store: Store) {
  return {
    /** The agent joins the nightly fan-out; idempotent. */
    async registerAgent(agentId: string): Promise<void> {
      agentId = parseInput(agentIdSchema, agentId, 'agent id');
      await registerAgent(store, agentId, Date.now());
    },

    /**
     * Persist one batch; each request's entries come back in order with their ids. Under the
     * policy the agent's workflow read (docs/invariants.md, One policy), not this worker's
     * settings. A sealed write is opened here, with its entries' keys (core/sealed.ts); one
     * whose entries are refused is answered so on its own, and the others of the batch persist.
     */
    async persistWrites(requests: WriteUpdate[], stored: Policy): Promise<PersistOutcome[]> {
      const parsedPolicy = parseInput(policySchema, stored, 'policy');
      const policy = memoryPolicy(parsedPolicy);
      const now = Date.now();
      // A sealed entry whose key is gone was erased between its send and now: nothing of it
      // is written, and it is answered as erased.
      const opened = await Promise.all(
        requests.map(async (req): Promise<{ built: Entry[]; erased: string[] } | InvalidWrite> => {
          if (!isSealedWrite(req)) return { built: entriesOf(req, policy), erased: [] };
          const keys = await contentKeys(
            store,
            req.agentId,
            req.entries.map((e) => e.id),
          );
          try {
            const { write, erased } = openSealedWrite(req, keys, writeLimitsOf(parsedPolicy), now);
            return { built: entriesOf(write, policy), erased };
          } catch (err) {
            if (!(err instanceof InvalidInputError)) throw err;
            return { invalid: { message: err.message, issues: err.issues } };
          }
        }),
      );
      const taken = opened.flatMap((o, i) => ('invalid' in o ? [] : [{ req: requests[i]!, ...o }]));
      const status: Map<string, WriteStatus> = await insertNewEntries(
        store,
        taken.flatMap((o) => o.built),
      );
      for (const o of taken) for (const id of o.erased) status.set(id, 'deleted');
      // A write resent after its entry was deleted (erased, or evicted behind a stand-in)
      // brought its content back into Temporal, under a key found again or made anew: deleting
      // the key keeps that copy unreadable too.
      await Promise.all(
        taken.flatMap(({ req }) =>
          isSealedWrite(req)
            ? req.entries
                .filter((e) => status.get(e.id) === 'deleted')
                .map((e) => shredContentKey(store, req.agentId, e.id))
            : [],
        ),
      );
      const acknowledged = Context.current().metricMeter.createCounter(
        'memgate_write_entries',
        'entries',
        'entries the write path acknowledged, by status (created, existing, deleted)',
      );
      for (const s of status.values()) acknowledged.add(1, { status: s });
      return opened.map((o, i) => {
        if ('invalid' in o) return o;
        const req = requests[i]!;
        const ids = isSealedWrite(req) ? req.entries.map((e) => e.id) : o.built.map((e) => e._id);
        return ids.map((id) => ({ id, status: status.get(id)! }));
      });
    },
  };
}
