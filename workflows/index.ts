export { agentMemory } from './agentMemory';
export { contextWindow } from './contextWindow';
export { memgateAudit } from './audit';
export { consolidateAgent, forget, nightlyConsolidation, restore } from './consolidation';
