import type { WorkloadParams } from './workload';

/** The seed's observed run: store capped at 250,000 entries, half-life 72 h, gate 0.15. */
export const SEED_CAPACITY = 250_000;

/**
 * The workload at `scale` (1 = the seed's size): capacity, subjects, writes and queries scale
 * together. Calibrated at scale 1 so that salience-ranked deletion lands near what the seed
 * observed (about 4,700 evictions, 61 % below the gate, 7 % of those needed again within five
 * days). Smaller scales keep the proportions, not the exact mix: the clustering's candidate
 * cut-off is an absolute count, so small stores merge a little more.
 */
export function seedScenario(
  scale: number,
  seed = 30,
  overrides: Partial<WorkloadParams> = {},
): { params: WorkloadParams; env: Record<string, string> } {
  const n = (x: number) => Math.max(1, Math.round(x * scale));
  const params: WorkloadParams = {
    seed,
    start: Date.UTC(2025, 0, 6),
    days: 30,
    warmSubjects: n(2_000),
    coldSubjects: n(800),
    onboardDays: 18,
    onboardingWrites: 90,
    onboardingReports: 8,
    ingestWritesPerDay: n(3_500),
    steadyWritesPerDay: n(330),
    roles: { update: 0.016, draft: 0.1, report: 0.08, chatter: 0.8, quota: 0.004 },
    warmQueriesPerDay: n(40_000),
    coldQueryRate: 0.09,
    judgedShare: 0.025,
    draftShare: 0.4,
    ...overrides,
  };
  const env = {
    MEMGATE_HOT_CAPACITY: String(n(SEED_CAPACITY)),
    MEMGATE_HALF_LIFE_HOURS: '72',
    MEMGATE_GATE_THRESHOLD: '0.15',
  };
  return { params, env };
}

/**
 * The scaled-down workload for runs through the real stack: four warm subjects, capacity 360,
 * met on day 5; half of the warm questions are judged so a short run still judges over a
 * hundred answers. Ten cold subjects asked about every other day, and more volatile quotas,
 * make a short run bring a spilled fact back and expire a quota, as the seed's month does.
 * A high low watermark keeps reclaim's moves, and the run, short.
 */
export function stackScenario(days = 10, seed = 5): { params: WorkloadParams; env: Record<string, string> } {
  const roles = seedScenario(0.002, seed).params.roles;
  const quota = 0.04;
  const { params, env } = seedScenario(0.002, seed, {
    days,
    onboardDays: 7,
    warmQueriesPerDay: 24,
    judgedShare: 0.5,
    coldSubjects: 10,
    coldQueryRate: 0.5,
    roles: { ...roles, quota, chatter: roles.chatter - (quota - roles.quota) },
  });
  return { params, env: { ...env, MEMGATE_HOT_CAPACITY: '360', MEMGATE_LOW_WATERMARK: '0.97' } };
}
