import type { Config } from '../core/config';
import { queryMatches } from '../core/nightly/plans';
import { DAY_MS } from '../core/salience';
import { terms } from '../core/text';
import { judge, readAnswer, Tally } from './judge';
import { entryId } from '../core/ids';
import { DECISIONS, type Decision } from '../core/nightly/registry';
import { SimStore, simPolicy, type Eviction, type NightDecisions, type ReclaimMode } from './model';
import { Workload, type WorkloadParams } from './workload';

/** Deep recall as the judged reader asks it: everything about one subject. */
export const JUDGED_K = 200;
/** "Needed again": a query matching the deleted entry within this long after its deletion. */
export const REFERENCE_WINDOW_MS = 5 * DAY_MS;

export interface PolicyOutcome {
  policy: ReclaimMode;
  writes: number;
  recalls: number;
  evictions: number;
  evictionsBelowGate: number;
  shareBelowGate: number;
  /** Below-gate evictions a judged question asked for within 5 days: it held the current value. */
  belowGateNeededWithin5Days: number;
  shareOfBelowGateNeeded: number;
  /** Below-gate evictions any logged query matched within 5 days (a looser "referenced"). */
  belowGateMatchedByQueryWithin5Days: number;
  /** Evictions by what the workload wrote, split by whether the entry was below the gate. */
  evictedByRole: Record<string, { belowGate: number; live: number }>;
  answers: Tally;
  /** The most candidates one judged recall had; below JUDGED_K, no answer depended on ranking. */
  maxJudgedCandidates: number;
  /** Totals of every nightly decision kind. */
  decisions: Record<Decision, number>;
  tombstones: number;
  final: { hot: number; cold: number };
  maxHot: number;
  /** First night on which the store went over capacity (day index), if it did. */
  firstPressureNight?: number;
  seconds: number;
}

export interface SimulationRun {
  outcome: PolicyOutcome;
  /** Every night's decision sets, when asked for (the real-stack comparison needs them). */
  nights?: NightDecisions[];
}

/** Query times by term, to tell whether a deleted entry was asked about again. */
class QueryLog {
  private readonly byTerm = new Map<string, { at: number; terms: string[] }[]>();
  private readonly interned = new Map<string, string[]>();

  add(text: string, at: number): void {
    let queryTerms = this.interned.get(text);
    if (!queryTerms) this.interned.set(text, (queryTerms = terms(text)));
    for (const t of queryTerms) {
      const list = this.byTerm.get(t);
      if (list) list.push({ at, terms: queryTerms });
      else this.byTerm.set(t, [{ at, terms: queryTerms }]);
    }
  }

  /** A logged query after `from` and at most `until` matches an entry with these terms. */
  matchedBetween(entryTerms: readonly string[], from: number, until: number): boolean {
    const have = new Set(entryTerms);
    for (const t of have) {
      for (const q of this.byTerm.get(t) ?? []) {
        if (q.at > from && q.at <= until && queryMatches(q.terms, have)) return true;
      }
    }
    return false;
  }
}

/**
 * Drive one policy through the workload: writes and recalls in time order, a nightly pass
 * after each day. Judged queries go through deep recall and the reader; the others are
 * only logged, which is all a recall changes (docs/invariants.md, Read-only recall).
 */
export async function simulate(
  params: WorkloadParams,
  config: Config,
  mode: ReclaimMode,
  opts: { agentId: string; keepNights?: boolean; progress?: (line: string) => void },
): Promise<SimulationRun> {
  const started = performance.now();
  const workload = new Workload(params);
  const store = new SimStore(opts.agentId, simPolicy(config), mode, workload.subjectNames());
  const log = new QueryLog();
  /** When each fact was asked for while it held the current value. */
  const needed = new Map<string, number[]>();
  const answers = new Tally();
  const decisions = Object.fromEntries(DECISIONS.map((k) => [k, 0])) as PolicyOutcome['decisions'];
  const nights: NightDecisions[] = [];
  let writes = 0;
  let recalls = 0;
  let maxHot = 0;
  let maxJudgedCandidates = 0;
  let firstPressureNight: number | undefined;
  for (const { day, events, nightAsOf } of workload.days()) {
    for (const event of events) {
      if (event.type === 'write') {
        store.write(event);
        writes++;
        continue;
      }
      recalls++;
      log.add(event.text, event.at);
      if (!event.judged) {
        store.logQuery(event.text, event.at);
        continue;
      }
      const truthId = entryId(opts.agentId, { idempotencyKey: event.judged.truthKey });
      const times = needed.get(truthId);
      if (times) times.push(event.at);
      else needed.set(truthId, [event.at]);
      const { hits, missing, candidates } = store.deepRecall(event.text, event.at, JUDGED_K);
      maxJudgedCandidates = Math.max(maxJudgedCandidates, candidates);
      const answer = readAnswer(hits, event.subject, event.judged.attribute);
      answers.add(judge(answer, event.judged.truth, missing), missing);
    }
    maxHot = Math.max(maxHot, store.hot.size);
    if (firstPressureNight === undefined && store.hot.size > config.hotCapacity) firstPressureNight = day;
    const night = await store.night(nightAsOf);
    for (const k of DECISIONS) decisions[k] += night[k].length;
    if (opts.keepNights) nights.push(night);
    opts.progress?.(
      `[${mode}] day ${day}: hot ${store.hot.size}, cold ${store.cold.size}, evicted ${night.evict.length}, spilled ${night.spill.length}`,
    );
  }
  const gated = store.evictions.filter((e) => e.gated);
  const within = (e: Eviction) => (t: number) => t > e.at && t <= e.at + REFERENCE_WINDOW_MS;
  const neededAgain = gated.filter((e) => (needed.get(e.id) ?? []).some(within(e))).length;
  const matched = gated.filter((e) => log.matchedBetween(e.terms, e.at, e.at + REFERENCE_WINDOW_MS)).length;
  const outcome: PolicyOutcome = {
    policy: mode,
    writes,
    recalls,
    evictions: store.evictions.length,
    evictionsBelowGate: gated.length,
    shareBelowGate: ratio(gated.length, store.evictions.length),
    belowGateNeededWithin5Days: neededAgain,
    shareOfBelowGateNeeded: ratio(neededAgain, gated.length),
    belowGateMatchedByQueryWithin5Days: matched,
    evictedByRole: byRole(store.evictions),
    answers,
    maxJudgedCandidates,
    decisions,
    tombstones: store.tombstones.size,
    final: { hot: store.hot.size, cold: store.cold.size },
    maxHot,
    seconds: Math.round((performance.now() - started) / 100) / 10,
  };
  if (firstPressureNight !== undefined) outcome.firstPressureNight = firstPressureNight;
  return opts.keepNights ? { outcome, nights } : { outcome };
}

function byRole(evictions: readonly Eviction[]): PolicyOutcome['evictedByRole'] {
  const out: PolicyOutcome['evictedByRole'] = {};
  for (const e of evictions) {
    const row = (out[e.role] ??= { belowGate: 0, live: 0 });
    if (e.gated) row.belowGate++;
    else row.live++;
  }
  return out;
}

function ratio(a: number, b: number): number {
  return b === 0 ? 0 : Math.round((a / b) * 1000) / 1000;
}
