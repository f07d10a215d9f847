/**
 * Context window Updates on the local server: round-trip latency of `admit` and `rehydrate`
 * with BENCH_WINDOW_SESSIONS (default 100) sessions driven concurrently, beside the time the
 * pure core/ transition takes for the very same operations (the workflow runs exactly that).
 * Each session plays BENCH_WINDOW_ADMITS admits (default 12, a turn after every third) into a
 * 10,000-token window, then BENCH_WINDOW_REHYDRATES rehydrations (default 6) of evicted
 * segments, some of which are refused. One session played alone first gives the round trip
 * with nothing else in flight.
 */
import { WindowClient } from '../client/window';
import { RehydrationBlocked } from '../core/window/blocked';
import {
  admit,
  advanceTurn,
  openWindow,
  rehydrate,
  type AdmitInput,
  type RehydrateInput,
  type Transition,
  type WindowSettingsInput,
  type WindowState,
} from '../core/window';
import { contextWindowWorkflowId } from '../workflows/contextWindow';
import { emit, percentile, round, startBenchEnv } from './support';

const SESSIONS = Number(process.env.BENCH_WINDOW_SESSIONS ?? 100);
const ADMITS = Number(process.env.BENCH_WINDOW_ADMITS ?? 12);
const REHYDRATES = Number(process.env.BENCH_WINDOW_REHYDRATES ?? 6);
/** The core transitions take microseconds: repeat each session's script this often to time them. */
const CORE_REPEATS = 20;

const SETTINGS: WindowSettingsInput = {
  capacity: 10_000,
  decay: 0.85,
  rehydrationThreshold: 0.6,
  margin: 0.1,
};

type Step = { op: 'admit'; input: AdmitInput } | { op: 'turn' } | { op: 'rehydrate'; input: RehydrateInput };

/**
 * A deterministic script per session: every third segment is pinned for two turns; each
 * rehydration targets a segment that is out of the window at that point (found by playing the
 * script on the core, which decides exactly as the workflow does).
 */
function script(session: number): Step[] {
  const steps: Step[] = [];
  let state = openWindow(SETTINGS);
  for (let i = 0; i < ADMITS; i++) {
    const tokens = 1_200 + ((session * 7 + i * 13) % 10) * 150;
    const salience = 0.3 + ((session + i * 3) % 7) / 10;
    const pin = i % 3 === 1 ? { pin: { kind: 'untilTurn' as const, expiresAtTurn: state.turn + 2 } } : {};
    const input = { segmentId: `seg-${i}`, tokens, salience, ...pin };
    steps.push({ op: 'admit', input });
    try {
      state = admit(state, input).state;
    } catch (err) {
      refusedOrThrow(err);
    }
    if (i % 3 === 2) {
      steps.push({ op: 'turn' });
      state = advanceTurn(state, {}).state;
    }
  }
  for (let r = 0; r < REHYDRATES; r++) {
    const resident = new Set(state.segments.map((s) => s.id));
    const out = [...new Set(state.evictions.map((e) => e.segmentId))].filter((id) => !resident.has(id));
    if (!out.length) break;
    const input = { segmentId: out[(session + r) % out.length]!, salience: 0.55 + ((session + r) % 5) / 10 };
    steps.push({ op: 'rehydrate', input });
    try {
      state = rehydrate(state, input).state;
    } catch (err) {
      refusedOrThrow(err);
    }
  }
  return steps;
}

function percentiles(ms: number[]) {
  const s = [...ms].sort((a, b) => a - b);
  return { n: s.length, p50: percentile(s, 50), p99: percentile(s, 99) };
}

/** A bad-input error is a bug in the script; only a refusal is an expected outcome. */
function refusedOrThrow(err: unknown): true {
  if (err instanceof RehydrationBlocked) return true;
  throw err;
}

function timeCore(): { admit: number[]; rehydrate: number[] } {
  const times = { admit: [] as number[], rehydrate: [] as number[] };
  const scripts = Array.from({ length: SESSIONS }, (_, i) => script(i));
  for (let repeat = 0; repeat < CORE_REPEATS; repeat++) {
    for (const steps of scripts) {
      let state: WindowState = openWindow(SETTINGS);
      for (const step of steps) {
        if (step.op === 'turn') {
          state = advanceTurn(state, {}).state;
          continue;
        }
        const apply: (s: WindowState, i: unknown) => Transition<unknown> =
          step.op === 'admit' ? admit : rehydrate;
        const t = process.hrtime.bigint();
        try {
          state = apply(state, step.input).state;
        } catch (err) {
          refusedOrThrow(err);
        }
        times[step.op].push(Number(process.hrtime.bigint() - t) / 1e6);
      }
    }
  }
  return times;
}

interface Tally {
  admit: number[];
  rehydrate: number[];
  refused: { admit: number; rehydrate: number };
}

const tally = (): Tally => ({ admit: [], rehydrate: [], refused: { admit: 0, rehydrate: 0 } });

/** Plays a script through the workflow, timing each admit and rehydrate round trip. */
async function play(windows: WindowClient, session: string, steps: Step[], into: Tally): Promise<void> {
  for (const step of steps) {
    if (step.op === 'turn') {
      await windows.advanceTurn(session);
      continue;
    }
    const s = performance.now();
    try {
      if (step.op === 'admit') await windows.admit(session, step.input);
      else await windows.rehydrate(session, step.input);
    } catch (err) {
      if (refusedOrThrow(err)) into.refused[step.op]++;
    }
    into[step.op].push(performance.now() - s);
  }
}

async function main() {
  const core = timeCore();
  const env = await startBenchEnv();
  const windows = new WindowClient(env.client.temporal, env.config);
  const sessions = Array.from({ length: SESSIONS }, (_, i) => `bench-window-${i}`);
  const idleSession = 'bench-window-idle';
  const concurrent = tally();
  const idle = tally();
  try {
    // One session alone first: the round trip with nothing else in flight.
    await windows.open(idleSession, SETTINGS);
    await play(windows, idleSession, script(0), idle);
    await Promise.all(sessions.map((s) => windows.open(s, SETTINGS)));
    console.error(`opened ${SESSIONS} sessions`);
    const t0 = performance.now();
    await Promise.all(sessions.map((session, i) => play(windows, session, script(i), concurrent)));
    const seconds = (performance.now() - t0) / 1000;
    const updates =
      concurrent.admit.length + concurrent.rehydrate.length + sessions.length * Math.floor(ADMITS / 3);
    const server = { admit: percentiles(concurrent.admit), rehydrate: percentiles(concurrent.rehydrate) };
    const pure = { admit: percentiles(core.admit), rehydrate: percentiles(core.rehydrate) };
    const inMs = (p: ReturnType<typeof percentiles>) => ({
      n: p.n,
      p50Ms: round(p.p50, 2),
      p99Ms: round(p.p99, 2),
    });
    const inUs = (p: ReturnType<typeof percentiles>) => ({
      n: p.n,
      p50Us: round(p.p50 * 1000, 1),
      p99Us: round(p.p99 * 1000, 1),
    });
    emit({
      bench: 'window',
      sessions: SESSIONS,
      admitsPerSession: ADMITS,
      rehydratesPerSession: REHYDRATES,
      refused: concurrent.refused,
      updateRoundTrip: { admit: inMs(server.admit), rehydrate: inMs(server.rehydrate) },
      idleRoundTrip: {
        admit: inMs(percentiles(idle.admit)),
        rehydrate: inMs(percentiles(idle.rehydrate)),
      },
      coreDecision: { admit: inUs(pure.admit), rehydrate: inUs(pure.rehydrate) },
      ratioUpdateToCore: {
        admitP50: Math.round(server.admit.p50 / pure.admit.p50),
        admitP99: Math.round(server.admit.p99 / pure.admit.p99),
        rehydrateP50: Math.round(server.rehydrate.p50 / pure.rehydrate.p50),
        rehydrateP99: Math.round(server.rehydrate.p99 / pure.rehydrate.p99),
      },
      updatesPerSecond: round(updates / seconds, 1),
      seconds: round(seconds, 2),
    });
  } finally {
    await Promise.all(
      [...sessions, idleSession].map((s) =>
        env.client.temporal.workflow
          .getHandle(contextWindowWorkflowId(s))
          .terminate('benchmark finished')
          .catch(() => undefined),
      ),
    );
    await env.close();
  }
}

void main().catch((err) => {
  console.error(err);
  process.exit(1);
});
