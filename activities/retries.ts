import { Context } from '@temporalio/activity';
import { doubtHotCount } from '../store/agents';
import type { Store } from '../store/db';
import type { RunContext } from '../store/ledger';
import { withdrawErasedCopies } from '../store/nightly';

/**
 * For an activity that deletes or moves the agent's entries and counts the change after: an
 * attempt before this one may have stopped between the two, and this one finds the change
 * made and counts nothing. The next reclaim then reads every hot entry and sets the count
 * again instead of trusting it (store/db.ts, `hotCountInDoubt`).
 */
export async function doubtHotCountIfRetried(store: Store, agentId: string): Promise<void> {
  if (Context.current().info.attempt > 1) await doubtHotCount(store, agentId);
}

/**
 * For a night's phase: an attempt before this one may have stopped between a move's copy and
 * its look for an erasure, and this one no longer plans that entry (store/nightly.ts,
 * `withdrawErasedCopies`).
 */
export async function withdrawErasedCopiesIfRetried(store: Store, run: RunContext): Promise<void> {
  if (Context.current().info.attempt > 1) await withdrawErasedCopies(store, run);
}
