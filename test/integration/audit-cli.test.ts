import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AuditRecord } from '../../audit/records';
import { auditTaskQueue, auditWorkflowId } from '../../audit/workflow';
import { runMemgate } from '../support/cli';
import { hasData, LONGMEMEVAL_S as DATA } from '../support/data';
import { startTestEnv, type TestEnv } from '../support/env';

let env: TestEnv;
const out = mkdtempSync(join(tmpdir(), 'audit-out-'));
beforeAll(async () => {
  env = await startTestEnv();
});
afterAll(async () => {
  await env?.close();
  rmSync(out, { recursive: true, force: true });
});

const memgate = (extraEnv: Record<string, string>, ...args: string[]) => runMemgate(env, args, extraEnv);

describe('memgate audit (the installed command)', () => {
  it('refuses bad options with exit code 2 and a typed error, before starting anything', async () => {
    const budgets = await memgate({}, 'audit', '--budgets', '8000,lots');
    expect(budgets.code).toBe(2);
    expect(budgets.stderr).toMatch(/\[InvalidInput\].*budgets/);
    const reader = await memgate({ OPENAI_BASE_URL: '' }, 'audit', '--reader', 'model');
    expect(reader.code).toBe(2);
    expect(reader.stderr).toMatch(/\[InvalidConfig\]: OPENAI_BASE_URL/);
    const ranker = await memgate({}, 'audit', '--ranker', 'dense');
    expect(ranker.code).toBe(2);
    expect(ranker.stderr).toMatch(/\[InvalidInput\].*ranker/);
    const data = await memgate({}, 'audit', '--data', join(out, 'nowhere'));
    expect(data.code).toBe(2);
    expect(data.stderr).toMatch(/no such file or folder/);
    // An --out it cannot write into is refused before the audit runs, not after.
    const aFile = join(out, 'a-file');
    writeFileSync(aFile, '');
    const unwritable = await memgate(
      {},
      'audit',
      '--questions',
      '00ca467f',
      '--budgets',
      '8000',
      '--out',
      join(aFile, 'results'),
    );
    expect(unwritable.stderr).toMatch(/\[InvalidInput\].*--out/);
    expect(unwritable.code).toBe(2);
  });

  it.skipIf(!hasData(DATA))(
    'audits a question end to end and writes records, summary, table and chart',
    async () => {
      const runId = `cli${Date.now().toString(36)}`;
      const r = await memgate(
        {},
        'audit',
        '--questions',
        '00ca467f',
        '--budgets',
        '8000',
        '--out',
        out,
        '--run-id',
        runId,
      );
      expect(r.code).toBe(0);
      // On the audit's own queue, served by the worker the command brought: the production
      // queue's worker (this environment's) never ran it, and the nightly run lists no audit agent.
      const described = await env.client.temporal.workflow.getHandle(auditWorkflowId(runId)).describe();
      expect(described.taskQueue).toBe(auditTaskQueue(env.config.taskQueue));
      expect(await env.store.agents.countDocuments()).toBe(0);
      expect(r.stderr).toMatch(/question×arm steps/);
      const records = readFileSync(join(out, 'records.jsonl'), 'utf8')
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as AuditRecord);
      // no-eviction × 2 conditions, 7 budgeted arms × 2, memgate × 2 read settings × 2.
      expect(records).toHaveLength(2 + 7 * 2 + 2 * 2);
      expect(new Set(records.map((x) => x.questionId))).toEqual(new Set(['00ca467f']));
      const summary = JSON.parse(readFileSync(join(out, 'summary.json'), 'utf8'));
      expect(summary).toMatchObject({ questions: 1, records: records.length, settings: { budgets: [8000] } });
      expect(readFileSync(join(out, 'summary.md'), 'utf8')).toContain(
        '| top-60 | retained store | evidence / match | 8k | fifo |',
      );
      expect(readFileSync(join(out, 'chart.svg'), 'utf8')).toMatch(/^<svg[\s\S]*<\/svg>\n$/);
      expect(r.stdout).toContain('irreversible share');
      expect(new Set(records.map((x) => x.ranker))).toEqual(new Set(['bm25']));
      // The run's summary is recorded for the memory browser's chart (GET /v1/audit).
      expect(await env.client.lastAudit()).toMatchObject({ runId, rows: summary.rows });
    },
    300_000,
  );

  it.skipIf(!hasData(DATA))(
    'reads with the hybrid ranker when asked (--ranker hybrid), embedding the haystack on the embeddings server',
    async () => {
      const runId = `clih${Date.now().toString(36)}`;
      const dir = join(out, 'hybrid');
      const r = await memgate(
        {},
        'audit',
        '--questions',
        '00ca467f',
        '--budgets',
        '8000',
        '--ranker',
        'hybrid',
        '--out',
        dir,
        '--run-id',
        runId,
      );
      expect(r.code).toBe(0);
      const records = readFileSync(join(dir, 'records.jsonl'), 'utf8')
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as AuditRecord);
      expect(records).toHaveLength(2 + 7 * 2 + 2 * 2);
      expect(new Set(records.map((x) => x.ranker))).toEqual(new Set(['hybrid']));
      const summary = JSON.parse(readFileSync(join(dir, 'summary.json'), 'utf8'));
      expect(summary).toMatchObject({ settings: { ranker: 'hybrid' } });
    },
    600_000,
  );
});
