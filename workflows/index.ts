export { agentMemory } from './agentMemory';
export { contextWindow } from './contextWindow';
export { eraseAgent } from './eraseAgent';
export { forget } from './forget';
export { consolidateAgent, nightlyConsolidation } from './nightly';
export { restore } from './restore';
export { reembed } from './reembed';
