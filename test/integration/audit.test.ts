import { WorkflowFailedError } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AuditSettings } from '../../audit/messages';
import {
  armPolicy,
  AUDIT_ARMS,
  summariseAudit,
  type AuditRecord,
  type SummaryRow,
} from '../../audit/records';
import { auditRecordsOfRun } from '../../store/audit';
import {
  auditProgressQuery,
  auditTaskQueue,
  auditWorkflowId,
  memgateAudit,
  type AuditInput,
} from '../../audit/workflow';
import { createAuditWorker, type WorkerHandle } from '../../worker/worker';
import { hasData, LONGMEMEVAL_S as DATA } from '../support/data';
import { startTestEnv, type TestEnv } from '../support/env';

const QUESTIONS = ['00ca467f', '07741c45', '1de5cff2', '36580ce8', '06878be2', 'gpt4_4edbafa2'];
const BUDGETS = [80_000, 30_000, 8_000];
const CLASSIC = ['fifo', 'random-1', 'random-2', 'random-3', 'redundancy', 'importance'];

let env: TestEnv;
/** The audit's own worker, as `memgate audit` brings one along; the env's worker serves production. */
let auditWorker: WorkerHandle;
let auditRunning: Promise<void>;
async function startAuditWorker(): Promise<void> {
  auditWorker = await createAuditWorker(env.config, env.endpoints);
  auditRunning = auditWorker.run();
}
async function stopAuditWorker(): Promise<void> {
  auditWorker?.worker.shutdown();
  await auditRunning;
}
let records: AuditRecord[];
let rows: SummaryRow[];
const runId = `t${Date.now().toString(36)}`;
const settings: AuditSettings = {
  budgets: BUDGETS,
  reader: 'evidence',
  judge: 'match',
  restoreCapTokens: 2000,
  ranker: 'bm25',
};
const input: AuditInput = { runId, source: DATA, questionIds: QUESTIONS, settings, concurrency: 2 };

function row(arm: string, budget: number | null, condition: string): SummaryRow {
  const found = rows.find((r) => r.arm === arm && r.budget === budget && r.condition === condition);
  if (!found) throw new Error(`no row ${arm} ${budget} ${condition}`);
  return found;
}

describe.skipIf(!hasData(DATA))('restore-counterfactual audit on LongMemEval-S (evidence reader)', () => {
  beforeAll(async () => {
    env = await startTestEnv();
    await startAuditWorker();
  });
  afterAll(async () => {
    await stopAuditWorker();
    await env?.close();
  });

  it('runs as a workflow that survives a worker restart and writes one record per question, arm, budget, read setting and condition', async () => {
    const handle = await env.client.temporal.workflow.start(memgateAudit, {
      workflowId: auditWorkflowId(runId),
      taskQueue: auditTaskQueue(env.config.taskQueue),
      args: [input],
    });
    // Crash the worker once work is under way; the workflow and its activities resume on the next one.
    for (;;) {
      const p = await handle.query(auditProgressQuery);
      if (p.stepsDone >= 2) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    await stopAuditWorker();
    await startAuditWorker();
    const result = await handle.result();
    records = await auditRecordsOfRun(env.store, runId);
    rows = summariseAudit(records);

    // Per question: no-eviction 1 × 2 conditions; 7 budgeted arms × 3 budgets × 2; memgate 3 × 2 read settings × 2.
    const perQuestion = 2 + 7 * BUDGETS.length * 2 + BUDGETS.length * 2 * 2;
    expect(result).toMatchObject({
      questions: 6,
      questionsDone: 6,
      stepsDone: 6 * AUDIT_ARMS.length,
      excluded: 0,
    });
    expect(records).toHaveLength(6 * perQuestion);
    expect(new Set(records.map((r) => r._id)).size).toBe(records.length);
    expect(new Set(records.map((r) => r.questionId))).toEqual(new Set(QUESTIONS));
    for (const r of records) {
      expect(r).toMatchObject({ reader: 'evidence', judge: 'match', ...armPolicy(r.arm) });
      if (r.readSetting !== 'hot+cold')
        expect(r.store.reachableTokens).toBeLessThanOrEqual(r.budget ?? Infinity);
    }
  }, 600_000);

  it('every question is in the denominator: the evidence reader answers with the clean gold', () => {
    for (const r of rows) expect(r.denominator).toBe(6);
  });

  it('no-eviction has zero irreversible errors', () => {
    for (const r of rows.filter((x) => x.arm === 'no-eviction')) {
      expect(r.irreversible).toBe(0);
      expect(r.goldEvictedRate).toBe(0);
    }
  });

  it('at 8k every classic policy that errs does so irreversibly under top-60 (share 1.00)', () => {
    for (const arm of CLASSIC) {
      const r = row(arm, 8_000, 'top-60');
      expect(r.recoverable).toBe(0);
      if (r.irreversible > 0) expect(r.irreversibleShare).toBe(1);
    }
    for (const arm of ['fifo', 'random-1', 'redundancy'])
      expect(row(arm, 8_000, 'top-60').irreversible).toBeGreaterThan(0);
  });

  it('the gold-evicting control has the highest irreversible rate at every budget', () => {
    for (const condition of ['top-60', 'forced-gold']) {
      for (const budget of BUDGETS) {
        const control = row('gold-control', budget, condition);
        const others = rows.filter(
          (r) => r.condition === condition && (r.budget === budget || r.budget === null),
        );
        for (const r of others) expect(control.irreversibleRate!).toBeGreaterThanOrEqual(r.irreversibleRate!);
        expect(control.goldEvictedRate).toBeGreaterThanOrEqual(
          row('random-1', budget, condition).goldEvictedRate,
        );
      }
    }
  });

  it('forced-gold leaves the recoverable bin empty, by construction, but for gold kept out of reach', () => {
    for (const r of rows.filter((x) => x.condition === 'forced-gold')) {
      if (r.readSetting === 'hot') {
        expect(r.note).toMatch(/kept in cold/);
        continue;
      }
      expect(r.recoverable).toBe(0);
      expect(r.note).toMatch(/by construction/);
    }
  });

  it('memgate read with deep recall has zero irreversible errors: it deleted nothing, it spilled', () => {
    const deep = records.filter((r) => r.arm === 'memgate' && r.readSetting === 'hot+cold');
    expect(deep.length).toBeGreaterThan(0);
    for (const r of deep) {
      expect(r.gold.deleted).toBe(0);
      expect(r.gold.evicted).toBe(0);
      expect(r.verdicts.bin).not.toBe('irreversible');
      expect(r.store.reachableUnits).toBe(r.store.units);
    }
    // Read hot-only, the same spills cost answers: the gold went cold, not away.
    const hot = records.filter((r) => r.arm === 'memgate' && r.readSetting === 'hot' && r.budget === 8_000);
    expect(hot.some((r) => r.gold.evicted > 0 && r.gold.deleted === 0)).toBe(true);
  });

  it('counts an error irreversible only when its gold is gone from every tier the arm keeps', () => {
    for (const r of records.filter((x) => x.verdicts.bin === 'irreversible')) {
      expect(r.gold.deleted).toBeGreaterThan(0);
    }
    // Gold spilled to cold survived: a hot-only read that misses it is retrieval's miss.
    const hot = records.filter((r) => r.arm === 'memgate' && r.readSetting === 'hot');
    expect(
      hot.some((r) => r.verdicts.bin === 'recoverable' && r.gold.evicted > 0 && r.gold.deleted === 0),
    ).toBe(true);
    // A classic policy keeps nothing beside what it retains: what it cannot reach is gone.
    for (const r of records.filter((x) => x.arm === 'fifo')) expect(r.gold.deleted).toBe(r.gold.evicted);
  });

  it('the tightness checks agree with the bins: no placebo flips, no irreversible error fixed without its evicted gold', () => {
    for (const r of rows) {
      expect(r.violations).toEqual({
        survivingGoldFixedIrreversible: 0,
        wholeStoreFixedIrreversible: 0,
        placeboFlips: 0,
      });
    }
    expect(records.some((r) => r.verdicts.checks !== null)).toBe(true);
  });

  it('refuses an input that did not come through the command, typed, before any work', async () => {
    const handle = await env.client.temporal.workflow.start(memgateAudit, {
      workflowId: auditWorkflowId(`${runId}-bad`),
      taskQueue: auditTaskQueue(env.config.taskQueue),
      args: [{ ...input, runId: `${runId}-bad`, source: { $ne: null }, concurrency: 0 } as never],
    });
    const failure = await handle.result().catch((err: unknown) => err);
    expect(failure).toBeInstanceOf(WorkflowFailedError);
    expect((failure as WorkflowFailedError).cause).toMatchObject({ type: 'InvalidInput' });
    expect((failure as WorkflowFailedError).cause?.message).toMatch(
      /source.*concurrency|concurrency.*source/s,
    );
  });

  it('rerunning a finished run id reuses its records instead of recomputing them', async () => {
    const again = await env.client.temporal.workflow.execute(memgateAudit, {
      workflowId: auditWorkflowId(runId),
      taskQueue: auditTaskQueue(env.config.taskQueue),
      args: [input],
    });
    expect(again.records).toBe(records.length);
    const after = await auditRecordsOfRun(env.store, runId);
    expect(after.map((r) => [r._id, r.at])).toEqual(records.map((r) => [r._id, r.at]));
  });
});
