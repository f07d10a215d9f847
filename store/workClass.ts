/**
 * Which class of work the store commands of an async call chain serve (core/admission.ts,
 * WorkClass). A chain is interactive unless it runs inside `asBackground`, so a caller who
 * forgets to say is served first, never starved; only work declared background yields.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import type { WorkClass } from '../core/admission';

const current = new AsyncLocalStorage<WorkClass>();

/** The class of the store commands issued here. */
export function currentWorkClass(): WorkClass {
  return current.getStore() ?? 'interactive';
}

/** Runs `work` with its store commands admitted as background work. */
export function asBackground<T>(work: () => Promise<T>): Promise<T> {
  return current.run('background', work);
}
