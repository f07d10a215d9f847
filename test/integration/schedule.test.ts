import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NightlySchedule } from '../../client/schedule';
import { NotFoundError } from '../../core/errors';
import { DAY_MS, HOUR_MS } from '../../core/salience';
import { consolidateAgentWorkflowId } from '../../core/ids';
import { nightlyConsolidation, type NightlyResult } from '../../workflows/nightly';
import { startTestEnv, type TestEnv } from '../support/env';

let env: TestEnv;
// The real `memgate-nightly` belongs to whoever runs `npm start` on this server; tests use their own id.
const scheduleId = `memgate-nightly-test-${randomUUID().slice(0, 8)}`;
let schedule: NightlySchedule;

beforeAll(async () => {
  env = await startTestEnv({
    MEMGATE_NIGHTLY_AT: '02:30',
    MEMGATE_NIGHTLY_TZ: 'Europe/Berlin',
    MEMGATE_NIGHTLY_CATCHUP_HOURS: '6',
    MEMGATE_CONSOLIDATION_CONCURRENCY: '2',
  });
  schedule = new NightlySchedule(env.client.temporal, env.config, scheduleId);
});
afterAll(async () => {
  await env?.client.temporal.schedule
    .getHandle(scheduleId)
    .delete()
    .catch(() => undefined);
  await env?.close();
});

const T0 = Date.UTC(2025, 6, 1);

async function writeAgents(names: string[]): Promise<string[]> {
  const agents = names.map((n) => env.agent(n));
  for (const [i, agentId] of agents.entries()) {
    await env.client.write({
      agentId,
      entries: [
        { text: `Agent ${i} prefers the ${['red', 'green', 'blue'][i % 3]} dashboard theme.`, writtenAt: T0 },
      ],
    });
  }
  return agents;
}

/** Wait for `count` runs the Schedule started, and their results. */
async function scheduledResults(count: number): Promise<NightlyResult[]> {
  for (;;) {
    const { recentRuns } = await schedule.describe();
    if (recentRuns.length >= count) {
      return Promise.all(
        recentRuns.map(
          (r) => env.client.temporal.workflow.getHandle(r.workflowId).result() as Promise<NightlyResult>,
        ),
      );
    }
    await new Promise((r) => setTimeout(r, 200));
  }
}

describe('the nightly Schedule and fan-out', () => {
  it('nightlyConsolidation runs one consolidateAgent child per agent with work, a bounded number at once', async () => {
    const agents = await writeAgents(['fan-a', 'fan-b', 'fan-c']);
    const asOf = T0 + DAY_MS;
    const result = await env.client.temporal.workflow.execute(nightlyConsolidation, {
      workflowId: `nightly-test-${randomUUID()}`,
      taskQueue: env.config.taskQueue,
      args: [{ asOf }],
    });
    expect(result).toMatchObject({ asOf, agents: agents.length, completed: agents.length, failed: [] });
    const children = await Promise.all(
      agents.map((a) =>
        env.client.temporal.workflow.getHandle(consolidateAgentWorkflowId(a, asOf)).describe(),
      ),
    );
    expect(children.map((c) => c.status.name)).toEqual(['COMPLETED', 'COMPLETED', 'COMPLETED']);
    // Never more than MEMGATE_CONSOLIDATION_CONCURRENCY children at once.
    const spans = children.map((c) => [c.startTime.getTime(), c.closeTime!.getTime()] as const);
    for (const [start] of spans) {
      expect(spans.filter(([s, e]) => s <= start && start < e).length).toBeLessThanOrEqual(2);
    }
    for (const a of agents) expect(await env.store.runs.countDocuments({ agentId: a, asOf })).toBe(1);
    expect(await env.store.runs.countDocuments({ kind: 'nightly', asOf })).toBe(1);
  }, 300_000);

  it('is created idempotently from the configuration, and can be described, paused and unpaused', async () => {
    await expect(schedule.describe()).rejects.toBeInstanceOf(NotFoundError);
    expect(await schedule.ensure()).toEqual({ scheduleId, action: 'created' });
    expect(await schedule.ensure()).toEqual({ scheduleId, action: 'updated' });
    const described = await schedule.describe();
    expect(described).toMatchObject({
      scheduleId,
      paused: false,
      calendar: '02:30',
      timezone: 'Europe/Berlin',
      overlap: 'SKIP',
      catchupWindowMs: 6 * HOUR_MS,
      taskQueue: env.config.taskQueue,
    });
    expect(described.nextRuns.length).toBeGreaterThan(0);
    expect(await schedule.pause('maintenance')).toMatchObject({ paused: true, note: 'maintenance' });
    // Re-creating keeps an operator's pause.
    await schedule.ensure();
    expect((await schedule.describe()).paused).toBe(true);
    expect(await schedule.unpause()).toMatchObject({ paused: false });
  }, 120_000);

  it('trigger starts a nightly run now; backfill replays missed nights, each as of its own night', async () => {
    await writeAgents(['sched-a']);
    await schedule.trigger();
    const [triggered] = await scheduledResults(1);
    expect(triggered!.failed).toEqual([]);
    expect(triggered!.completed).toBeGreaterThanOrEqual(1);

    // 02:30 in Berlin is 00:30 UTC in July.
    await schedule.backfill(new Date(Date.UTC(2025, 6, 10, 0, 0)), new Date(Date.UTC(2025, 6, 12, 0, 0)));
    const results = await scheduledResults(3);
    const asOfs = results.map((r) => new Date(r.asOf).toISOString()).sort();
    expect(asOfs).toContain('2025-07-10T00:30:00.000Z');
    expect(asOfs).toContain('2025-07-11T00:30:00.000Z');
    expect(await env.store.runs.countDocuments({ kind: 'nightly', asOf: Date.UTC(2025, 6, 11, 0, 30) })).toBe(
      1,
    );
  }, 300_000);
});
