import { insertIgnoringExisting, type LedgerRecord, type Store } from './db';

/** The ledger of a run's changes: every change of the night leaves one record, rewritten as a no-op on a rerun. */

export interface RunContext {
  agentId: string;
  asOf: number;
  runId: string;
}

/** The ledger record of one event of one run; rewriting it is a no-op. */
export async function recordEvent(
  store: Store,
  ctx: RunContext,
  event: string,
  entryId: string,
  reason: string,
  inputs?: Record<string, unknown>,
): Promise<void> {
  await recordEvents(store, ctx, [{ event, entryId, reason, ...(inputs && { inputs }) }]);
}

export function ledgerId(ctx: RunContext, event: string, entryId: string): string {
  return `${ctx.runId}:${event}:${entryId}`;
}

/** Ledger records of one run, in one round trip; each keyed by run, event and entry, so a rerun writes none again. */
export async function recordEvents(
  store: Store,
  ctx: RunContext,
  events: readonly { event: string; entryId: string; reason: string; inputs?: Record<string, unknown> }[],
): Promise<void> {
  await insertIgnoringExisting(
    store.ledger,
    events.map(({ event, entryId, reason, inputs }) => {
      const record: LedgerRecord = {
        _id: ledgerId(ctx, event, entryId),
        agentId: ctx.agentId,
        at: ctx.asOf,
        event,
        entryId,
        reason,
        runId: ctx.runId,
      };
      if (inputs) record.inputs = inputs;
      return record;
    }),
  );
}

/** How many `event` records a run has written: a phase's count, exact across retries. */
export async function countEvents(store: Store, ctx: RunContext, event: string): Promise<number> {
  return store.ledger.countDocuments({ agentId: ctx.agentId, runId: ctx.runId, event });
}
