import { z } from 'zod';
import type { WriteLimits } from './entry';

/**
 * The decisions every worker must make alike for an agent (docs/invariants.md, One policy):
 * how salience decays and gates, when reclaim runs and what it may delete, what merges, how
 * long the query log and the ledger, run and audit records are kept, and how large a write
 * may be. One stored document holds
 * it (store/policy.ts); a workflow reads it once and hands it to each of its activities, so
 * a worker's own environment never decides for an agent. The environment variables of the
 * same names only propose it (`memgate policy apply`).
 */
const fraction = z.number().gt(0).lt(1);
const count = z.number().int().positive().max(Number.MAX_SAFE_INTEGER);

export const policySchema = z
  .strictObject({
    halfLifeHours: z.number().positive().max(87_600),
    gateThreshold: fraction,
    reclaimFloor: fraction,
    refreshWindowHours: z.number().positive(),
    refreshSalience: z.number().gt(0).max(1),
    // Defaulted, so a policy stored before the field existed still reads.
    refreshByMeaning: z.boolean().default(true),
    hotCapacity: count,
    highWatermark: z.number().positive().max(1),
    lowWatermark: z.number().positive().max(1),
    evictLossySubsumed: z.boolean(),
    clusterSimilarity: fraction,
    clusterNeighbours: count,
    // Defaulted, so a policy stored before the fields existed still reads.
    clusterByMeaning: z.boolean().default(false),
    clusterMeaningSimilarity: fraction.default(0.96),
    queryLogRetentionDays: count,
    ledgerRetentionDays: count,
    runRetentionDays: count,
    auditRetentionDays: count,
    maxTextChars: count,
    maxEntriesPerWrite: count,
  })
  .superRefine((p, ctx) => {
    for (const c of policyConflicts(p)) ctx.addIssue({ code: 'custom', path: [c.field], message: c.rule });
  });
export type Policy = z.output<typeof policySchema>;
export type PolicyField = keyof Policy;
export const POLICY_FIELDS = Object.keys(policySchema.shape) as PolicyField[];

/** The rules between fields; the configuration and a stored or travelling policy share them. */
export function policyConflicts(p: Policy): { field: PolicyField; rule: string }[] {
  const out: { field: PolicyField; rule: string }[] = [];
  // A floor at or above the gate cannot tell dormant from dead (docs/invariants.md, Eviction boundary).
  if (p.reclaimFloor >= p.gateThreshold) out.push({ field: 'reclaimFloor', rule: 'below gateThreshold' });
  if (p.lowWatermark > p.highWatermark) out.push({ field: 'lowWatermark', rule: 'at most highWatermark' });
  // A refreshed entry that restarts below the gate would be dormant again at once.
  if (p.refreshSalience <= p.gateThreshold) {
    out.push({ field: 'refreshSalience', rule: 'above gateThreshold' });
  }
  return out;
}

/** The policy fields of a parsed configuration: what this environment proposes. */
export function policyOf(config: Policy): Policy {
  return Object.fromEntries(POLICY_FIELDS.map((f) => [f, config[f]])) as Policy;
}

/** The fields on which two policies differ. */
export function policyDrift(a: Policy, b: Policy): PolicyField[] {
  return POLICY_FIELDS.filter((f) => a[f] !== b[f]);
}

export function writeLimitsOf(p: Pick<Policy, 'maxTextChars' | 'maxEntriesPerWrite'>): WriteLimits {
  return { maxTextChars: p.maxTextChars, maxEntriesPerWrite: p.maxEntriesPerWrite };
}
