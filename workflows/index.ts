export { agentMemory } from './agentMemory';
export { contextWindow } from './contextWindow';
