import { InvalidConfigError } from '../core/errors';
import type { Policy } from '../core/policy';
import type { Store } from '../store/db';
import { storedPolicy } from '../store/policy';

/** A workflow reads the stored policy here once and hands it to its other activities. */
export function createPolicyActivities(store: Store) {
  return {
    async currentPolicy(): Promise<Policy> {
      const stored = await storedPolicy(store);
      // Every worker adopts one when it starts, so none stored means the store was tampered with.
      if (!stored) {
        throw new InvalidConfigError(
          'stored policy',
          'present; `memgate policy apply` stores one',
          undefined,
        );
      }
      const { version, ...policy } = stored;
      void version;
      return policy;
    },
  };
}
