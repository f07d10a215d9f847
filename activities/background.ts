import { asBackground } from '../store/workClass';
import type { Activity } from './liveness';

/**
 * Activities no caller waits on call by call (the night, embedding, erasing a whole agent):
 * their store commands yield to writes and recalls (core/admission.ts, WorkClass).
 */
export function inBackground<T extends Record<string, Activity>>(activities: T): T {
  const wrapped: Record<string, Activity> = {};
  for (const [name, fn] of Object.entries(activities)) {
    wrapped[name] = (...args: never[]) => asBackground(() => fn(...args));
  }
  return wrapped as T;
}
