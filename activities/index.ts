import type { Config } from '../core/config';
import type { MemoryPolicy } from '../core/entry';
import { createModels } from '../llm';
import { extractiveSummarizer } from '../llm/summarizer';
import type { Store } from '../store/db';
import { createAuditActivities } from './audit';
import { createConsolidationActivities } from './consolidation';
import { createWriteActivities } from './write';

export interface ActivityDeps {
  store: Store;
  policy: MemoryPolicy;
  config: Config;
}

export function createActivities(deps: ActivityDeps) {
  return {
    ...createWriteActivities(deps.store, deps.policy),
    ...createAuditActivities(deps.store, deps.config, deps.policy, createModels(deps.config)),
    ...createConsolidationActivities(deps.store, deps.config, extractiveSummarizer),
  };
}

export type Activities = ReturnType<typeof createActivities>;
