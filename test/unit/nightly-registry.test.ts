import { describe, expect, it } from 'vitest';
import { phaseCountsSchema } from '../../core/messages';
import { NIGHT_PASS } from '../../core/nightly/phases';
import {
  COUNT_FIELDS,
  DECISIONS,
  NIGHT_PHASES,
  nightlyMetric,
  PASS_PHASES,
} from '../../core/nightly/registry';

describe('the registry of the nightly phases', () => {
  it('names each phase, count field and decision once', () => {
    const names = NIGHT_PHASES.map((p) => p.name);
    expect(new Set(names).size).toBe(names.length);
    expect(new Set(COUNT_FIELDS).size).toBe(COUNT_FIELDS.length);
    expect(new Set(DECISIONS).size).toBe(DECISIONS.length);
  });

  it("is what the run's counts hold, and what the pass runs", () => {
    expect(Object.keys(phaseCountsSchema.shape)).toEqual(COUNT_FIELDS);
    expect(Object.keys(NIGHT_PASS).sort()).toEqual([...PASS_PHASES].sort());
    expect(PASS_PHASES).toEqual(NIGHT_PHASES.filter((p) => !('external' in p)).map((p) => p.name));
  });

  it('names a count metric as Prometheus names go', () => {
    expect(nightlyMetric('lossySummaries')).toBe('memgate_nightly_lossy_summaries');
    expect(nightlyMetric('expired')).toBe('memgate_nightly_expired');
  });
});
