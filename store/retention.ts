import type { Policy } from '../core/policy';
import { DAY_MS } from '../core/salience';
import type { Store } from './db';

/**
 * Records past their retention (docs/invariants.md, One policy). Tombstones are never
 * pruned: they are the proof that a deletion happened and what stands in for it. Run once a
 * night over all agents, by age on an indexed field; on the local stack FerretDB does not
 * push a range down, so this one nightly pass reads each collection whole.
 */
export async function pruneRecords(
  store: Store,
  asOf: number,
  policy: Pick<Policy, 'ledgerRetentionDays' | 'runRetentionDays' | 'auditRetentionDays'>,
): Promise<{ ledgerPruned: number; runsPruned: number; auditPruned: number }> {
  const before = (days: number) => asOf - days * DAY_MS;
  const [ledger, runs, audit] = await Promise.all([
    store.ledger.deleteMany({ at: { $lt: before(policy.ledgerRetentionDays) } }),
    store.runs.deleteMany({ asOf: { $lt: before(policy.runRetentionDays) } }),
    store.auditRecords.deleteMany({ at: { $lt: before(policy.auditRetentionDays) } }),
  ]);
  return {
    ledgerPruned: ledger.deletedCount,
    runsPruned: runs.deletedCount,
    auditPruned: audit.deletedCount,
  };
}
