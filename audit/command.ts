import { createHash } from 'node:crypto';
import { accessSync, constants, existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { Option, type Command } from 'commander';
import { z } from 'zod';
import { summariseAudit } from './records';
import { InvalidInputError, StackUnavailableError } from '../core/errors';
import { auditInputSchema, auditSettingsSchema } from './messages';
import { chooseJudge, chooseReader, createModels } from '../llm';
import { auditRecordsOfRun } from '../store/audit';
import { recordAuditRun } from '../store/browse';
import {
  auditProgressQuery,
  auditTaskQueue,
  auditWorkflowId,
  memgateAudit,
  type AuditInput,
  type AuditProgress,
} from './workflow';
import { MemgateClient } from '../client/client';
import { toMemgateError } from '../client/errors';
import { renderChart, renderTable } from './report';
import { config, resolveEndpoints } from '../cli/commands/context';
import { commaList, numeric, parseOptions, unreadableFile } from '../cli/commands/options';

/** The shared LongMemEval-S sample, beside the repository. */
// Beside the repository: two levels up from audit/ in the sources, three from dist/audit/.
const DEFAULT_DATA = resolve(
  __dirname,
  ...(__filename.endsWith('.js') ? ['..', '..', '..'] : ['..', '..']),
  'shared',
  'data',
  'longmemeval-s',
);

/**
 * The audit starts its own workflow, so its options are checked here, before anything
 * starts: each converted value goes through the workflow input's own rule for it.
 */
export const auditOptions = z.object({
  data: z.string().min(1),
  out: z.string().min(1),
  budgets: commaList
    .refine((b) => b.every((x) => /^[1-9]\d*$/.test(x)), 'whole numbers of tokens')
    .transform((b) => [...new Set(b.map(Number))].sort((x, y) => y - x))
    .pipe(auditSettingsSchema.shape.budgets),
  reader: auditSettingsSchema.shape.reader,
  judge: auditSettingsSchema.shape.judge,
  restoreCap: numeric.pipe(auditSettingsSchema.shape.restoreCapTokens),
  ranker: auditSettingsSchema.shape.ranker.unwrap(),
  questions: commaList.pipe(auditInputSchema.shape.questionIds.unwrap()).optional(),
  limit: numeric.pipe(auditInputSchema.shape.limit.unwrap()).optional(),
  runId: auditInputSchema.shape.runId.optional(),
  concurrency: numeric.pipe(auditInputSchema.shape.concurrency),
});

function progressLine(p: AuditProgress, startedAt: number): string {
  const width = 30;
  const filled = p.steps ? Math.round((p.stepsDone / p.steps) * width) : 0;
  const seconds = Math.round((Date.now() - startedAt) / 1000);
  return (
    `[${'#'.repeat(filled)}${'-'.repeat(width - filled)}] ${p.stepsDone}/${p.steps} question×arm steps · ` +
    `${p.questionsDone}/${p.questions} questions · ${Math.floor(seconds / 60)}m${String(seconds % 60).padStart(2, '0')}s`
  );
}

export function registerAuditCommands(program: Command): void {
  program
    .command('audit')
    .description(
      'restore-counterfactual audit of eviction policies on LongMemEval-format data, run as a Temporal workflow',
    )
    .addOption(
      new Option(
        '--data <path>',
        'a LongMemEval file (one question or a JSON list) or a folder of them',
      ).default(DEFAULT_DATA, '../shared/data/longmemeval-s beside the repository'),
    )
    .option('--out <dir>', 'where records, summary and chart are written', 'audit-out')
    .option('--budgets <tokens>', 'comma-separated token budgets', '80000,30000,8000')
    .option('--reader <reader>', 'evidence (offline) or model (needs OPENAI_BASE_URL)', 'evidence')
    .option('--judge <judge>', 'match (normalised match) or model (needs OPENAI_BASE_URL)', 'match')
    .option('--restore-cap <tokens>', 'most gold tokens the restore step adds', '2000')
    .option(
      '--ranker <ranker>',
      'bm25 (the frozen BM25 top-60, as in the paper) or hybrid (BM25 fused with embeddings, as recall ranks)',
      'bm25',
    )
    .option('--questions <ids>', 'only these comma-separated question ids')
    .option('--limit <n>', 'only the first n questions')
    .option('--run-id <id>', 'run id; rerunning with one resumes it (default: derived from the options)')
    .option('--concurrency <n>', 'questions audited at once', '2')
    .action(async (raw: Record<string, unknown>, command: Command) => {
      const o = parseOptions(auditOptions, raw, command);
      const c = config();
      const models = createModels(c);
      chooseReader(models, o.reader);
      chooseJudge(models, o.judge);
      const source = resolve(o.data);
      if (!existsSync(source)) throw new InvalidInputError(`no such file or folder: ${source} (--data)`);
      // Made and checked now: an audit runs for minutes, and its results go here at the end.
      const outDir = resolve(o.out);
      try {
        mkdirSync(outDir, { recursive: true });
        accessSync(outDir, constants.W_OK);
      } catch (err) {
        throw unreadableFile('audit', '--out', outDir, err);
      }
      const settings = {
        budgets: o.budgets,
        reader: o.reader,
        judge: o.judge,
        restoreCapTokens: o.restoreCap,
        ranker: o.ranker,
      };
      const what = {
        source,
        ...(o.questions ? { questionIds: o.questions } : {}),
        ...(o.limit ? { limit: o.limit } : {}),
        settings,
      };
      // Same data and settings, same run: rerunning the command resumes or reuses it. The
      // default ranker is left out, so runs started before there was a choice keep their id.
      const { ranker: _default, ...earlierSettings } = settings;
      const identity = o.ranker === 'bm25' ? { ...what, settings: earlierSettings } : what;
      const runId =
        o.runId ??
        createHash('sha256')
          .update(JSON.stringify({ ...identity, model: models.remote ? c.openaiModel : null }))
          .digest('hex')
          .slice(0, 12);
      const input: AuditInput = { runId, ...what, concurrency: o.concurrency };

      const endpoints = await resolveEndpoints();
      if (o.ranker === 'hybrid' && 'unavailable' in endpoints.embeddings)
        throw new StackUnavailableError(
          `--ranker hybrid needs embeddings: ${endpoints.embeddings.unavailable}`,
        );
      // The audit's activities read the data files, so this process brings its own worker,
      // on the audit's own queue: production workers never run an audit.
      const { createAuditWorker } = await import('../worker/worker');
      const worker = await createAuditWorker(c, endpoints);
      const running = worker.run();
      const client = await MemgateClient.connect(c, endpoints);
      const startedAt = Date.now();
      try {
        const handle = await client.temporal.workflow.start(memgateAudit, {
          workflowId: auditWorkflowId(input.runId),
          taskQueue: auditTaskQueue(c.taskQueue),
          args: [input],
          workflowIdConflictPolicy: 'USE_EXISTING',
        });
        console.error(`audit run ${input.runId}: workflow ${handle.workflowId} (see the Temporal UI)`);
        let finished = false;
        const result = handle.result().finally(() => (finished = true));
        let lastLogged = -1;
        while (!finished) {
          await Promise.race([result.catch(() => undefined), new Promise((r) => setTimeout(r, 1000))]);
          if (finished) break;
          const p = await handle.query(auditProgressQuery).catch(() => undefined);
          if (!p) continue;
          if (process.stderr.isTTY) process.stderr.write(`\r${progressLine(p, startedAt)}`);
          else if (Math.floor((p.stepsDone / Math.max(1, p.steps)) * 10) > lastLogged) {
            lastLogged = Math.floor((p.stepsDone / Math.max(1, p.steps)) * 10);
            console.error(progressLine(p, startedAt));
          }
        }
        const outcome = await result.catch((err: unknown) => {
          throw toMemgateError(err);
        });
        if (process.stderr.isTTY) process.stderr.write('\n');
        const wallSeconds = Math.round((Date.now() - startedAt) / 100) / 10;

        const records = await auditRecordsOfRun(client.store, input.runId);
        const rows = summariseAudit(records);
        writeFileSync(join(outDir, 'records.jsonl'), records.map((r) => JSON.stringify(r)).join('\n') + '\n');
        writeFileSync(
          join(outDir, 'summary.json'),
          JSON.stringify({ ...outcome, data: source, settings, wallSeconds, rows }, null, 2) + '\n',
        );
        const table = renderTable(rows);
        writeFileSync(join(outDir, 'summary.md'), table);
        const first = records[0];
        const title =
          `Restore-counterfactual audit · ${outcome.questions} questions · ` +
          `${first ? `${first.reader} reader, ${first.judge} judge, ${settings.ranker} ranker` : 'no records'}`;
        writeFileSync(join(outDir, 'chart.svg'), renderChart(rows, title));
        // The memory browser draws the last run's chart from this (docs/browser.md).
        await recordAuditRun(client.store, { runId: input.runId, at: Date.now(), title, rows });
        console.log(table);
        console.log(
          `${records.length} records, ${outcome.excluded} questions outside the denominator, ${wallSeconds}s; ` +
            `written to ${outDir} (records.jsonl, summary.json, summary.md, chart.svg)`,
        );
      } finally {
        worker.worker.shutdown();
        await running;
        await client.close();
      }
    });
}
