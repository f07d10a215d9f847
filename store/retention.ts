import type { Policy } from '../core/policy';
import { DAY_MS } from '../core/salience';
import type { Store } from './db';
import { trimFeed } from './vectorFeed';

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

/** Agents' feeds trimmed per read of their documents. */
const FEEDS_PER_PAGE = 100;

/**
 * Every agent's log of vector changes, trimmed to what is still in flight (store/vectorFeed.ts,
 * trimFeed): once a night, after the agents' runs. Returns how many changes went.
 */
export async function trimVectorFeeds(store: Store, opts: { fenceDelayMs: number }): Promise<number> {
  let trimmed = 0;
  let after = '';
  for (;;) {
    const page = await store.vectorFeeds
      .find({ _id: { $gt: after } }, { projection: { _id: 1 } })
      .sort({ _id: 1 })
      .limit(FEEDS_PER_PAGE)
      .toArray();
    for (const { _id } of page) trimmed += await trimFeed(store, _id, opts);
    if (page.length < FEEDS_PER_PAGE) return trimmed;
    after = page.at(-1)!._id;
  }
}
