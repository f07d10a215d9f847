export { agentMemory } from './agentMemory';
