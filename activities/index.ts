import type { MemoryPolicy } from '../core/entry';
import type { Store } from '../store/db';
import { createWriteActivities } from './write';

export interface ActivityDeps {
  store: Store;
  policy: MemoryPolicy;
}

export function createActivities(deps: ActivityDeps) {
  return {
    ...createWriteActivities(deps.store, deps.policy),
  };
}

export type Activities = ReturnType<typeof createActivities>;
