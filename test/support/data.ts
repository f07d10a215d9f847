import { existsSync } from 'node:fs';
import { resolve } from 'node:path';

/** The LongMemEval-S sample beside the repository (not part of it). */
export const LONGMEMEVAL_S = resolve(__dirname, '..', '..', '..', 'shared', 'data', 'longmemeval-s');

/**
 * Whether a data folder outside the repository is there. A developer without it skips the
 * tests that read it; CI never does: there its absence fails the run, naming the folder.
 */
export function hasData(path: string): boolean {
  if (existsSync(path)) return true;
  if (process.env.CI) throw new Error(`test data missing: ${path}; CI runs every test that reads it`);
  return false;
}
