import type { ChildProcess } from 'node:child_process';
import { WorkflowFailedError } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HOUR_MS, dormantAt } from '../../core/salience';
import { agentMemory, agentMemoryWorkflowId } from '../../workflows/agentMemory';
import { killWorker, runMemgate, spawnWorker } from '../support/cli';
import { startTestEnv, type TestEnv } from '../support/env';
import { expectVerified } from '../support/verify';

/**
 * The worker that happens to take a task decides by the stored policy, never by its own
 * environment, and only `memgate policy apply` changes it (docs/invariants.md, One policy).
 * Here the only worker is a process whose environment proposes a tiny capacity and a one-hour
 * half-life; the store holds the defaults, so decisions must follow the defaults.
 */
const WORKER_ENV = { MEMGATE_HOT_CAPACITY: '5', MEMGATE_HALF_LIFE_HOURS: '1' };

let env: TestEnv;
let worker: ChildProcess;

beforeAll(async () => {
  env = await startTestEnv({}, { inProcessWorker: false });
  worker = await spawnWorker(env, WORKER_ENV);
}, 120_000);
afterAll(async () => {
  if (worker) await killWorker(worker);
  await env?.close();
});

const WORDS =
  'amber basalt cedar delta ember fjord garnet harbor indigo juniper kestrel lagoon marble nectar onyx pewter quartz raven saffron tundra umber violet willow xenon yarrow zephyr'.split(
    ' ',
  );

/** Entries that share few words, so the night has no near-duplicates to merge. */
async function writeNotes(agentId: string, n: number): Promise<void> {
  const pick = (i: number, k: number) => WORDS[(i * (k + 3) + k * 7) % WORDS.length]!;
  await env.client.write({
    agentId,
    entries: Array.from({ length: n }, (_, i) => ({
      text: `Ledger line ${i}: ${pick(i, 0)} ${pick(i, 1)} ${pick(i, 2)} shipment ${i * 7919} cleared.`,
      salience: 0.9,
    })),
  });
}

describe('a worker whose environment proposes another policy', () => {
  it('writes entries that decay by the stored half-life', async () => {
    const agentId = env.agent('decay');
    await writeNotes(agentId, 1);
    const entry = (await env.store.hot.findOne({ agentId }))!;
    const stored = env.client.policy;
    expect(stored.halfLifeHours).toBe(72);
    expect(entry.dormantAt).toBe(
      dormantAt(entry.salience, stored.halfLifeHours * HOUR_MS, stored.gateThreshold),
    );
  });

  it('reclaims by the stored capacity: nothing spills below it', async () => {
    const agentId = env.agent('capacity');
    await writeNotes(agentId, 20);
    const report = await env.client.consolidate({
      agentId,
      asOf: Date.now(),
    });
    expect(report.counts.spilled).toBe(0);
    // The 20 and the night's summaries of them, all still hot.
    expect(report.store).toMatchObject({ hot: 20 + report.counts.summarised, cold: 0 });
    await expectVerified(env, agentId);
  });

  it('a write run started through the Temporal API cannot bring limits of its own', async () => {
    const agentId = env.agent('raw-limits');
    const handle = await env.client.temporal.workflow.start(agentMemory, {
      workflowId: agentMemoryWorkflowId(agentId),
      taskQueue: env.config.taskQueue,
      args: [{ agentId, limits: { maxTextChars: 1e9, maxEntriesPerWrite: 1e9 } } as never],
    });
    const failure = await handle.result().catch((err: unknown) => err);
    expect(failure).toBeInstanceOf(WorkflowFailedError);
    expect((failure as WorkflowFailedError).cause).toMatchObject({ type: 'InvalidInput' });
  });
});

describe('memgate policy', () => {
  it('shows the stored policy and which variables here differ from it', async () => {
    const r = await runMemgate(env, ['policy'], WORKER_ENV);
    expect(r.code).toBe(0);
    const shown = JSON.parse(r.stdout);
    expect(shown.policy).toMatchObject({ hotCapacity: env.config.hotCapacity, halfLifeHours: 72 });
    expect(shown.differsHere.sort()).toEqual(['MEMGATE_HALF_LIFE_HOURS', 'MEMGATE_HOT_CAPACITY']);
  });

  it('refuses an invalid proposal with a typed error and keeps the stored policy', async () => {
    const r = await runMemgate(env, ['policy', 'apply'], {
      MEMGATE_HIGH_WATERMARK: '0.8',
      MEMGATE_LOW_WATERMARK: '0.9',
    });
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/\[InvalidConfig\]: MEMGATE_LOW_WATERMARK/);
    const shown = JSON.parse((await runMemgate(env, ['policy'])).stdout);
    expect(shown.policy.lowWatermark).toBe(env.config.lowWatermark);
  });

  it('refuses a reclaim floor at or above the gate as configuration: exit 2, typed', async () => {
    const r = await runMemgate(env, ['policy', 'apply'], {
      MEMGATE_RECLAIM_FLOOR: '0.5',
      MEMGATE_GATE_THRESHOLD: '0.2',
    });
    expect(r.stderr).toMatch(/\[EvictionBoundaryError\]/);
    expect(r.code).toBe(2);
  });

  it('apply stores the proposal, and the next run decides by it', async () => {
    const agentId = env.agent('applied');
    await writeNotes(agentId, 20);
    const r = await runMemgate(env, ['policy', 'apply'], { MEMGATE_HOT_CAPACITY: '10' });
    expect(r.code).toBe(0);
    const applied = JSON.parse(r.stdout);
    expect(applied).toMatchObject({ version: 2, changed: ['MEMGATE_HOT_CAPACITY'] });
    expect(applied.policy.hotCapacity).toBe(10);
    const report = await env.client.consolidate({
      agentId,
      asOf: Date.now(),
    });
    // Down to the low watermark of the applied capacity (0.9 × 10), not the worker's 5.
    expect(report.store).toMatchObject({ hot: 9, cold: 20 + report.counts.summarised - 9, tombstones: 0 });
    await expectVerified(env, agentId);
  });
});
