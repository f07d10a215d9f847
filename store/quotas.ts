import { QuotaExceededError, StackUnavailableError } from '../core/errors';
import { isDuplicateKey, type QuotaKind, type Store } from './db';

/**
 * Quotas per API key (docs/store.md, Quotas): the agents a key may write for and the window
 * sessions it may hold open. A claim is recorded once per key and id, so a key writes on for
 * the agents it has; the counter beside the claims keeps the bound under concurrent claims
 * of different ids (only an increment below the bound succeeds).
 */
const claimId = (keyId: string, kind: QuotaKind, id: string) => `${keyId} ${kind} ${id}`;
const quotaId = (keyId: string, kind: QuotaKind) => `${keyId} ${kind}`;

const WHAT: Record<QuotaKind, string> = { agent: 'agents', window: 'open window sessions' };

/** A claim not counted within this long was left by a call that died; the next call counts it. */
const ABANDONED_MS = 30_000;
/** How long a call waits for a concurrent call's claim of the same id to be counted. */
const CLAIM_WAIT_MS = 50;
const CLAIM_TRIES = 40;

/**
 * Claims `id` for the key, or QuotaExceeded when the key already holds `max` of the kind.
 * The claim is recorded first (uncounted), then counted: two concurrent calls for one new id
 * count it once, the second waiting for the first's count (or refusal, which removes it).
 */
export async function claimForKey(
  store: Store,
  claim: { keyId: string; kind: QuotaKind; id: string; max: number; at: number; settlesIn: number },
): Promise<void> {
  const { keyId, kind, id } = claim;
  const _id = claimId(keyId, kind, id);
  for (let attempt = 0; attempt < CLAIM_TRIES; attempt++) {
    const held = await store.keyClaims.findOne({ _id });
    if (held?.counted) {
      // Each call under way keeps its claim young, so `releaseUnheld` leaves it be; renewed
      // once per half `settlesIn`, not on every call.
      if (claim.at - held.at >= claim.settlesIn / 2)
        await store.keyClaims.updateOne({ _id, counted: true }, { $set: { at: claim.at } });
      return;
    }
    if (held && Date.now() - held.at < ABANDONED_MS) {
      await new Promise((done) => setTimeout(done, CLAIM_WAIT_MS));
      continue;
    }
    if (!held) {
      try {
        await store.keyClaims.insertOne({
          _id,
          keyId,
          kind,
          ...(kind === 'agent' ? { agentId: id } : { sessionId: id }),
          at: claim.at,
          counted: false,
        });
      } catch (err) {
        if (isDuplicateKey(err)) continue;
        throw err;
      }
    }
    try {
      await countClaim(store, claim);
    } catch (err) {
      await store.keyClaims.deleteOne({ _id, counted: false });
      throw err;
    }
    await store.keyClaims.updateOne({ _id }, { $set: { counted: true } });
    return;
  }
  throw new StackUnavailableError(
    `the quota claim of ${kind} ${id} for key ${keyId} was not settled in time`,
    {
      keyId,
      kind,
    },
  );
}

/**
 * One more claim of the kind for the key. Below the bound the filter matches (or the counter
 * is new) and the increment lands; at it, the upsert would insert a second counter of the
 * same `_id`, which the store refuses. Two first claims at once meet that refusal too, with
 * the counter still below the bound: the one refused tries again.
 */
async function countClaim(
  store: Store,
  { keyId, kind, max }: { keyId: string; kind: QuotaKind; max: number },
): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    try {
      await store.keyQuotas.updateOne(
        { _id: quotaId(keyId, kind), n: { $lt: max } },
        { $inc: { n: 1 } },
        { upsert: true },
      );
      return;
    } catch (err) {
      if (!isDuplicateKey(err)) throw err;
      const counter = await store.keyQuotas.findOne({ _id: quotaId(keyId, kind) });
      if ((counter?.n ?? 0) >= max || attempt >= 2) {
        throw new QuotaExceededError(`key ${keyId} holds its quota of ${max} ${WHAT[kind]}`, {
          keyId,
          kind,
          max,
        });
      }
    }
  }
}

/** The key gives the id back (a window closed): it no longer counts toward the quota. */
export async function releaseForKey(store: Store, keyId: string, kind: QuotaKind, id: string): Promise<void> {
  const { deletedCount } = await store.keyClaims.deleteOne({ _id: claimId(keyId, kind, id), counted: true });
  if (deletedCount) await store.keyQuotas.updateOne({ _id: quotaId(keyId, kind) }, { $inc: { n: -1 } });
}

/**
 * Before when a counted claim was last renewed for no call to be under way with it: a call
 * renews a claim older than half `settlesIn` as it begins (`claimForKey`) and lasts at most
 * `settlesIn`, so the claim of a call under way is at most one and a half `settlesIn` old.
 */
export function unrenewedBefore(now: number, settlesIn: number): number {
  return now - 1.5 * settlesIn;
}

/**
 * The ids the key's counted claims of the kind name, of claims made before `before`: a call
 * that claimed earlier has had time to write its agent or open its window, or to fail.
 */
export async function settledClaims(
  store: Store,
  keyId: string,
  kind: QuotaKind,
  before: number,
): Promise<string[]> {
  const claims = await store.keyClaims.find({ keyId, kind }, { projection: { at: 1, counted: 1 } }).toArray();
  const prefix = claimId(keyId, kind, '').length;
  return claims.filter((c) => c.counted && c.at < before).map((c) => c._id.slice(prefix));
}

/**
 * The key gives back a place nothing holds, unless a call claimed it again since `before`
 * (a write under way for the agent). True when it was given back.
 */
export async function releaseUnheld(
  store: Store,
  keyId: string,
  kind: QuotaKind,
  id: string,
  before: number,
): Promise<boolean> {
  const { deletedCount } = await store.keyClaims.deleteOne({
    _id: claimId(keyId, kind, id),
    counted: true,
    at: { $lt: before },
  });
  if (deletedCount) await store.keyQuotas.updateOne({ _id: quotaId(keyId, kind) }, { $inc: { n: -1 } });
  return deletedCount === 1;
}

/** Erasing an agent: no key's claim names it any more, and each key gets its count back. */
export async function releaseAgentClaims(store: Store, agentId: string): Promise<number> {
  return releaseEveryClaim(
    store,
    'agent',
    await store.keyClaims.find({ agentId }, CLAIM_FIELDS).toArray(),
    agentId,
  );
}

/**
 * A window ended (closed by any key, or by its agent's erasure): every key's claim of it goes,
 * and each key gets its count back. Claims made before they named their session are found by
 * the closing key's claim only.
 */
export async function releaseWindowClaims(store: Store, sessionId: string, closer?: string): Promise<void> {
  await releaseEveryClaim(
    store,
    'window',
    await store.keyClaims.find({ sessionId }, CLAIM_FIELDS).toArray(),
    sessionId,
  );
  if (closer !== undefined) await releaseForKey(store, closer, 'window', sessionId);
}

const CLAIM_FIELDS = { projection: { keyId: 1, counted: 1 } };

async function releaseEveryClaim(
  store: Store,
  kind: QuotaKind,
  claims: readonly { _id: string; keyId: string; counted: boolean }[],
  id: string,
): Promise<number> {
  for (const c of claims) {
    if (c.counted) await releaseForKey(store, c.keyId, kind, id);
    else await store.keyClaims.deleteOne({ _id: c._id, counted: false });
  }
  return claims.length;
}
