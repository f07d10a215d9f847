import { POLICY_FIELDS, policySchema, type Policy } from '../core/policy';
import { InvalidConfigError } from '../core/errors';
import type { PolicyRecord, Store } from './db';

/**
 * The one stored policy (core/policy.ts). The first process to open an empty store adopts
 * the policy its environment proposes; after that only `applyPolicy` changes it, so every
 * worker and client of the store reads the same one.
 */

function fromRecord(record: PolicyRecord): Policy & { version: number } {
  const { _id, version, appliedAt, ...fields } = record;
  void _id;
  void appliedAt;
  const parsed = policySchema.safeParse(fields);
  // Written only through `applyPolicy`, which validates; a hand-edited document is caught here.
  if (!parsed.success) {
    throw new InvalidConfigError('stored policy', 'a policy that `memgate policy apply` accepts', fields);
  }
  return { ...parsed.data, version };
}

/**
 * The stored policy, adopting `proposed` first if the store has none yet. A field a newer
 * memgate added, which the stored policy lacks, is adopted the same way.
 */
export async function adoptPolicy(store: Store, proposed: Policy): Promise<Policy & { version: number }> {
  const record = (await store.policy.findOneAndUpdate(
    { _id: 'policy' },
    { $setOnInsert: { ...proposed, version: 1, appliedAt: Date.now() } },
    { upsert: true, returnDocument: 'after' },
  ))!;
  const missing = POLICY_FIELDS.filter((f) => record[f] === undefined);
  if (missing.length === 0) return fromRecord(record);
  const added = Object.fromEntries(missing.map((f) => [f, proposed[f]]));
  // Only where still absent: a concurrent adoption or apply that set a field keeps it.
  for (const f of missing) {
    await store.policy.updateOne({ _id: 'policy', [f]: { $exists: false } }, { $set: { [f]: added[f] } });
  }
  return fromRecord((await store.policy.findOne({ _id: 'policy' }))!);
}

export async function storedPolicy(store: Store): Promise<(Policy & { version: number }) | undefined> {
  const record = await store.policy.findOne({ _id: 'policy' });
  return record ? fromRecord(record) : undefined;
}

/** Replace the stored policy; the runs and writes that start after it use the new one. */
export async function applyPolicy(store: Store, policy: Policy): Promise<Policy & { version: number }> {
  const checked = policySchema.parse(policy);
  const record = await store.policy.findOneAndUpdate(
    { _id: 'policy' },
    { $set: { ...checked, appliedAt: Date.now() }, $inc: { version: 1 } },
    { upsert: true, returnDocument: 'after' },
  );
  return fromRecord(record!);
}
