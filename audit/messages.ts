import { z } from 'zod';
import { AUDIT_ARMS } from './records';

/**
 * The restore-counterfactual audit's messages: the workflow's input and each of its
 * activities' tasks, validated as every workflow and activity validates its own
 * (core/messages.ts).
 */

/** A LongMemEval question: the file it is in, its index in a list file, its id. */
export interface QuestionRef {
  file: string;
  index: number | null;
  questionId: string;
}

/** An audit run id, also part of its agents' ids. */
const auditRunId = z.string().regex(/^[A-Za-z0-9-]{1,40}$/, '1-40 of A-Z a-z 0-9 -');
const questionId = z.string().min(1).max(200);

export const auditSettingsSchema = z.strictObject({
  budgets: z.array(z.number().int().positive()).min(1).max(16),
  reader: z.enum(['evidence', 'model']),
  judge: z.enum(['match', 'model']),
  restoreCapTokens: z.number().int().positive(),
  /**
   * Which ranker fills the read context: the frozen BM25 top-60, as in the paper, or memgate's
   * hybrid fusion with embeddings (core/hybrid.ts). Defaulted so a run started before the
   * choice existed still parses on replay.
   */
  ranker: z.enum(['bm25', 'hybrid']).default('bm25'),
});

export const auditInputSchema = z.strictObject({
  runId: auditRunId,
  /** A LongMemEval file or folder, as the audit's worker sees it. */
  source: z.string().min(1).max(4096),
  questionIds: z.array(questionId).max(10_000).optional(),
  limit: z.number().int().positive().optional(),
  settings: auditSettingsSchema,
  concurrency: z.number().int().min(1).max(8),
});

export const auditListSchema = auditInputSchema.pick({ source: true, questionIds: true, limit: true });

export const auditQuestionTaskSchema = z.strictObject({
  runId: auditRunId,
  ref: z.strictObject({
    file: z.string().min(1).max(4096),
    index: z.number().int().min(0).nullable(),
    questionId,
  }),
  settings: auditSettingsSchema,
});

export type AuditInput = z.output<typeof auditInputSchema>;
export type AuditSettings = z.output<typeof auditSettingsSchema>;
export type AuditQuestionTask = z.output<typeof auditQuestionTaskSchema>;

export const auditArmTaskSchema = auditQuestionTaskSchema.extend({
  arm: z.enum(AUDIT_ARMS),
  cleanGold: z.boolean(),
});
export type AuditArmTask = z.output<typeof auditArmTaskSchema>;
