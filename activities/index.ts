import type { Config } from '../core/config';
import { createModels } from '../llm';
import type { Store } from '../store/db';
import { createAuditActivities } from './audit';
import { createConsolidationActivities } from './consolidation';
import { withLiveness, withTypedFailures } from './failures';
import { createPolicyActivities } from './policy';
import { createWriteActivities } from './write';

export interface ActivityDeps {
  store: Store;
  config: Config;
}

export function createActivities(deps: ActivityDeps) {
  // The local models, or the OpenAI-compatible ones when OPENAI_BASE_URL is set.
  const models = createModels(deps.config);
  return withTypedFailures({
    ...createPolicyActivities(deps.store),
    ...createWriteActivities(deps.store),
    ...withLiveness(createConsolidationActivities(deps.store, deps.config, models.summarizer)),
  });
}

export type Activities = ReturnType<typeof createActivities>;

/** The audit's, for its own worker on its own task queue: production workers never load them. */
export function createAuditWorkerActivities(deps: ActivityDeps) {
  return withTypedFailures(createAuditActivities(deps.store, deps.config, createModels(deps.config)));
}

export type AuditActivities = ReturnType<typeof createAuditWorkerActivities>;
