import type { Config } from '../core/config';
import type { MemoryPolicy } from '../core/entry';
import { createModels } from '../llm';
import type { Store } from '../store/db';
import { createAuditActivities } from './audit';
import { createConsolidationActivities } from './consolidation';
import { withTypedFailures } from './failures';
import { createWriteActivities } from './write';

export interface ActivityDeps {
  store: Store;
  policy: MemoryPolicy;
  config: Config;
}

export function createActivities(deps: ActivityDeps) {
  // The local models, or the OpenAI-compatible ones when OPENAI_BASE_URL is set.
  const models = createModels(deps.config);
  return withTypedFailures({
    ...createWriteActivities(deps.store, deps.policy),
    ...createAuditActivities(deps.store, deps.config, deps.policy, models),
    ...createConsolidationActivities(deps.store, deps.config, models.summarizer),
  });
}

export type Activities = ReturnType<typeof createActivities>;
