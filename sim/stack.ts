import type { MemgateClient } from '../client/client';
import type { Config } from '../core/config';
import type { WriteEntryInput } from '../core/entry';
import { consolidateAgent } from '../workflows/nightly';
import { consolidateAgentWorkflowId, consolidationRunId } from '../core/ids';
import { judge, readAnswer, Tally } from './judge';
import { DECISIONS, type Decision } from '../core/nightly/registry';
import { noDecisions, type NightDecisions } from './model';
import { JUDGED_K } from './simulate';
import { Workload, type WorkloadParams } from './workload';

/** The ordinary recall an agent makes between judged questions. */
const BACKGROUND_K = 10;

export interface StackRun {
  nights: NightDecisions[];
  /** Wall seconds spent writing, recalling and in the nightly runs. */
  secondsIn: { writes: number; recalls: number; nights: number };
  answers: Tally;
  writes: number;
  recalls: number;
  seconds: number;
}

/**
 * The workload through the real stack: writes through the client (the agent's workflow),
 * every recall through the client (judged ones deep), and after each day the consolidateAgent
 * workflow at that night's `asOf`. Each night's decisions are read back from the ledger.
 */
export async function runThroughStack(
  client: MemgateClient,
  config: Config,
  params: WorkloadParams,
  agentId: string,
  progress?: (line: string) => void,
): Promise<StackRun> {
  const started = performance.now();
  const answers = new Tally();
  const nights: NightDecisions[] = [];
  let writes = 0;
  let recalls = 0;
  const ms = { writes: 0, recalls: 0, nights: 0 };
  const timed = async <T>(key: keyof typeof ms, fn: () => Promise<T>): Promise<T> => {
    const t = performance.now();
    try {
      return await fn();
    } finally {
      ms[key] += performance.now() - t;
    }
  };
  let pending: WriteEntryInput[] = [];
  const flush = async () => {
    if (pending.length === 0) return;
    const entries = pending;
    pending = [];
    await timed('writes', () => client.write({ agentId, entries }));
    writes += entries.length;
  };
  for (const { day, events, nightAsOf } of new Workload(params).days()) {
    for (const event of events) {
      if (event.type === 'write') {
        pending.push(event.entry);
        if (pending.length >= config.maxEntriesPerWrite) await flush();
        continue;
      }
      // A query sees every write made before it.
      await flush();
      recalls++;
      if (!event.judged) {
        await timed('recalls', () =>
          client.recall({ agentId, query: event.text, k: BACKGROUND_K, asOf: event.at }),
        );
        continue;
      }
      const res = await timed('recalls', () =>
        client.recall({ agentId, query: event.text, k: JUDGED_K, deep: true, asOf: event.at }),
      );
      const missing = res.missing?.length ?? 0;
      answers.add(
        judge(readAnswer(res.hits, event.subject, event.judged.attribute), event.judged.truth, missing),
        missing,
      );
    }
    await flush();
    await timed('nights', () =>
      client.temporal.workflow.execute(consolidateAgent, {
        taskQueue: config.taskQueue,
        workflowId: consolidateAgentWorkflowId(agentId, nightAsOf),
        args: [{ agentId, asOf: nightAsOf }],
      }),
    );
    const night = await ledgerDecisions(client, agentId, nightAsOf);
    nights.push(night);
    progress?.(
      `[stack] day ${day}: ${DECISIONS.map((k) => `${k} ${night[k].length}`).join(', ')}; ` +
        `seconds so far: ${Object.entries(ms)
          .map(([k, v]) => `${k} ${Math.round(v / 1000)}`)
          .join(', ')}`,
    );
  }
  const seconds = (x: number) => Math.round(x / 100) / 10;
  return {
    nights,
    secondsIn: { writes: seconds(ms.writes), recalls: seconds(ms.recalls), nights: seconds(ms.nights) },
    answers,
    writes,
    recalls,
    seconds: seconds(performance.now() - started),
  };
}

/** One run's decisions, from its ledger records. */
async function ledgerDecisions(
  client: MemgateClient,
  agentId: string,
  asOf: number,
): Promise<NightDecisions> {
  const records = await client.store.ledger
    .find({ agentId, runId: consolidationRunId(agentId, asOf) })
    .toArray();
  const night = noDecisions(asOf);
  for (const r of records) {
    const kind = DECISIONS.find((k) => k === r.event);
    if (!kind) continue;
    night[kind].push(kind === 'supersede' ? `${r.entryId}>${String(r.inputs?.supersededBy)}` : r.entryId);
  }
  for (const k of DECISIONS) night[k].sort();
  return night;
}

export interface DecisionComparison {
  match: boolean;
  nights: number;
  /** Decisions per kind over all nights, as the simulation made them. */
  counts: Record<Decision, number>;
  /** The first differences found, by night and kind. */
  differences: { night: number; kind: string; onlyInSimulation: string[]; onlyInStack: string[] }[];
}

export function compareDecisions(
  simulated: readonly NightDecisions[],
  stack: readonly NightDecisions[],
): DecisionComparison {
  const counts = Object.fromEntries(DECISIONS.map((k) => [k, 0])) as DecisionComparison['counts'];
  const differences: DecisionComparison['differences'] = [];
  const nights = Math.max(simulated.length, stack.length);
  for (let i = 0; i < nights; i++) {
    for (const kind of DECISIONS) {
      const a = simulated[i]?.[kind] ?? [];
      const b = stack[i]?.[kind] ?? [];
      counts[kind] += a.length;
      const inB = new Set(b);
      const inA = new Set(a);
      const onlyInSimulation = a.filter((id) => !inB.has(id));
      const onlyInStack = b.filter((id) => !inA.has(id));
      if ((onlyInSimulation.length || onlyInStack.length) && differences.length < 10) {
        differences.push({
          night: i,
          kind,
          onlyInSimulation: onlyInSimulation.slice(0, 5),
          onlyInStack: onlyInStack.slice(0, 5),
        });
      }
    }
  }
  return {
    match: differences.length === 0 && simulated.length === stack.length,
    nights,
    counts,
    differences,
  };
}
