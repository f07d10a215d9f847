export { agentMemory } from './agentMemory';
export { contextWindow } from './contextWindow';
export { consolidateAgent, forget, nightlyConsolidation, restore } from './consolidation';
