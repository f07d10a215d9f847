import { expect } from 'vitest';
import type { TestEnv } from './env';

/** `memgate verify` for one agent finds nothing wrong (and had ids to check). */
export async function expectVerified(env: TestEnv, agentId: string): Promise<void> {
  const report = await env.client.verify({ agentId });
  expect(report.findings).toEqual([]);
  expect(report.ok).toBe(true);
  expect(report.checked.ids).toBeGreaterThan(0);
}
