import type { ReclaimStep } from '../../core/nightly/reclaim';

/** A reclaim step that spills `id`, as reclaim decides one for a dormant, reachable entry. */
export const spillStep = (id: string): ReclaimStep => ({
  id,
  action: 'spill',
  why: 'dormant, reachable, refresh window open',
  rank: 0,
  inputs: {
    reclaimFloor: 0.05,
    gateThreshold: 0.15,
    gated: true,
    reachable: true,
    refreshWindowElapsed: false,
    subsumedLosslessly: false,
    lossySummaryFlagged: false,
  },
});
