import { randomUUID } from 'node:crypto';
import { Client, Connection, ServiceError } from '@temporalio/client';
import { Worker } from '@temporalio/worker';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inject } from 'vitest';
import { WindowClient } from '../../client/window';
import { ContentCodec } from '../../codec/payloadCodec';
import {
  ConflictError,
  InvalidInputError,
  MemgateError,
  NotFoundError,
  StackUnavailableError,
} from '../../core/errors';
import {
  admit,
  advanceTurn,
  openWindow,
  pin,
  rehydrate,
  unpin,
  viewWindow,
  RehydrationBlocked,
  type Transition,
  type WindowState,
} from '../../core/window';
import { contextWindow, contextWindowWorkflowId } from '../../workflows/contextWindow';
import { runMemgate } from '../support/cli';
import { startTestEnv, type TestEnv } from '../support/env';
import {
  CONSTRAINT,
  JSON_DUMP,
  playSteps,
  RATE_LIMITS,
  SEED_REHYDRATION,
  SEED_SETTINGS,
  SEED_STEPS,
  SUMMARY,
  TOOL_LOOP,
} from '../support/windowSeed';

let env: TestEnv;
let windows: WindowClient;
const sessions: string[] = [];

beforeAll(async () => {
  env = await startTestEnv();
  windows = new WindowClient(env.client.temporal, env.config);
});
afterAll(async () => {
  // Sessions are long-lived workflows; end the ones this file opened.
  await Promise.all(
    sessions.map((s) =>
      env.client.temporal.workflow
        .getHandle(contextWindowWorkflowId(s))
        .terminate('test finished')
        .catch(() => undefined),
    ),
  );
  await env?.close();
});

function newSession(name: string): string {
  const session = `${name}-${randomUUID().slice(0, 8)}`;
  sessions.push(session);
  return session;
}

async function playSeed(session: string): Promise<void> {
  await playSteps(SEED_STEPS, {
    turn: async () => (await windows.show(session)).turn,
    advanceTurn: (input) => windows.advanceTurn(session, input),
    admit: (input) => windows.admit(session, input),
  });
}

async function caught(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (err) {
    return err;
  }
  throw new Error('expected the call to fail');
}

const guarded = { session: '' };
const unguarded = { session: '' };

describe('the seed case through the contextWindow workflow', () => {
  it('refuses to rehydrate the rate-limits table over the pinned constraint (guard on)', async () => {
    guarded.session = newSession('seed-guarded');
    await windows.open(guarded.session, SEED_SETTINGS);
    await playSeed(guarded.session);
    const before = await windows.show(guarded.session);
    expect(before.turn).toBe(19);
    expect(before.evictions.find((e) => e.segmentId === RATE_LIMITS)).toMatchObject({
      turn: 12,
      displacedBy: JSON_DUMP,
      displacerPinned: true,
      displacerPins: [{ kind: 'toolLoop', loopId: TOOL_LOOP }],
    });

    const err = await caught(windows.rehydrate(guarded.session, SEED_REHYDRATION));
    expect(err).toBeInstanceOf(RehydrationBlocked);
    const blocked = err as RehydrationBlocked;
    expect(blocked.type).toBe('RehydrationBlocked');
    expect(blocked.reasons).toEqual(['evictedByLivePin', 'wouldDisplacePinned']);
    expect(blocked.incoming).toMatchObject({ id: RATE_LIMITS, tokens: 2_400, salience: 0.72 });
    expect(blocked.wouldDisplace).toEqual([expect.objectContaining({ id: CONSTRAINT, pinned: true })]);
    expect(blocked.pins).toEqual([
      { segmentId: JSON_DUMP, pin: { kind: 'toolLoop', loopId: TOOL_LOOP } },
      { segmentId: CONSTRAINT, pin: { kind: 'explicit' } },
    ]);

    const after = await windows.show(guarded.session);
    expect(after).toEqual(before);
    const resident = after.segments.map((s) => s.id);
    expect(resident).toContain(CONSTRAINT);
    expect(resident).not.toContain(RATE_LIMITS);
    // The caller answers from the summary that is already in the window.
    expect(after.segments.find((s) => s.id === SUMMARY)).toMatchObject({ tokens: 300 });
  });

  it('evicts the constraint when the same sequence runs with the guard off', async () => {
    unguarded.session = newSession('seed-unguarded');
    // The guard can be turned off only by starting the workflow by hand, as here.
    await env.client.temporal.workflow.start(contextWindow, {
      workflowId: contextWindowWorkflowId(unguarded.session),
      taskQueue: env.config.taskQueue,
      args: [{ sessionId: unguarded.session, settings: { ...SEED_SETTINGS, pinGuard: false } }],
    });
    await playSeed(unguarded.session);
    const result = await windows.rehydrate(unguarded.session, SEED_REHYDRATION);
    expect(result).toMatchObject({ mode: 'swap', segment: { id: RATE_LIMITS, displaced: [CONSTRAINT] } });
    const view = await windows.show(unguarded.session);
    expect(view.segments.map((s) => s.id)).not.toContain(CONSTRAINT);
    expect(view.evictions.at(-1)).toMatchObject({
      segmentId: CONSTRAINT,
      turn: 19,
      displacedBy: RATE_LIMITS,
    });
  });

  it('records every decision in history, and the histories replay deterministically', async () => {
    const histories = await Promise.all(
      [guarded.session, unguarded.session].map(async (session) => {
        const workflowId = contextWindowWorkflowId(session);
        const history = await env.client.temporal.workflow.getHandle(workflowId).fetchHistory();
        return { workflowId, history };
      }),
    );
    const guardedEvents = histories[0]!.history.events ?? [];
    const completed = guardedEvents.filter((e) => e.workflowExecutionUpdateCompletedEventAttributes);
    const refusal = completed.at(-1)!.workflowExecutionUpdateCompletedEventAttributes!.outcome!.failure!;
    expect(refusal.applicationFailureInfo?.type).toBe('RehydrationBlocked');
    expect(refusal.applicationFailureInfo?.nonRetryable).toBe(true);
    expect(refusal.message).toContain('making room would displace a pinned segment');

    const results = [];
    for await (const r of Worker.runReplayHistories(
      {
        workflowBundle: { codePath: inject('workflowBundlePath') },
        // Histories hold what memgate's codec encrypted: the replay decodes as a worker does.
        dataConverter: { payloadCodecs: [new ContentCodec(env.store)] },
      },
      histories,
    )) {
      results.push(r);
    }
    expect(results.map((r) => [r.workflowId, r.error])).toEqual(
      histories.map((h) => [h.workflowId, undefined]),
    );
  });

  it('a run started from carried state (as continue-as-new starts one) decides exactly as before', async () => {
    let state = openWindow(SEED_SETTINGS);
    await playSteps(SEED_STEPS, {
      turn: () => state.turn,
      advanceTurn: (input) => (state = advanceTurn(state, input).state),
      admit: (input) => (state = admit(state, input).state),
    });
    const session = newSession('carried');
    await env.client.temporal.workflow.start(contextWindow, {
      workflowId: contextWindowWorkflowId(session),
      taskQueue: env.config.taskQueue,
      args: [{ sessionId: session, settings: SEED_SETTINGS, state }],
    });
    expect(await windows.show(session)).toEqual(await windows.show(guarded.session));
    const err = await caught(windows.rehydrate(session, SEED_REHYDRATION));
    expect(err).toBeInstanceOf(RehydrationBlocked);
    expect((err as RehydrationBlocked).reasons).toEqual(['evictedByLivePin', 'wouldDisplacePinned']);
  });

  it('memgate window show prints the window and the eviction records', async () => {
    const run = (...args: string[]) => runMemgate(env, ['window', ...args]);
    const show = await run('show', guarded.session);
    expect(show.stderr).toBe('');
    expect(show.code).toBe(0);
    expect(show.stdout).toContain(`session ${guarded.session}  turn 19  38600/40000 tokens`);
    expect(show.stdout).toMatch(/user-constraint\s+2000\s+0\.043\s+explicit/);
    expect(show.stdout).toMatch(
      /api-rate-limits\s+2400\s+0\.177\s+12\s+tool-json-dump\s+yes \(toolLoop:fetch-usage-loop\)/,
    );
    const refused = await run('rehydrate', guarded.session, RATE_LIMITS, '--salience', '0.72');
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('error [RehydrationBlocked]');
  });
});

describe('the window client', () => {
  it('rejects bad input with a typed error and leaves the window unchanged', async () => {
    const session = newSession('bad-input');
    await windows.open(session, { capacity: 1000 });
    await windows.admit(session, { segmentId: 'a', tokens: 600, salience: 0.5 });
    await windows.admit(session, { segmentId: 'b', tokens: 300, salience: 0.9 });
    await windows.admit(session, { segmentId: 'c', tokens: 200, salience: 0.9 });
    const before = await windows.show(session);
    expect(before.evictions.map((e) => e.segmentId)).toEqual(['a']);
    const cases: [() => Promise<unknown>, new (...args: never[]) => MemgateError][] = [
      [() => windows.admit(session, { segmentId: 'n', tokens: -1, salience: 0.5 }), InvalidInputError],
      [() => windows.admit(session, { segmentId: 'n', tokens: 2.5, salience: 0.5 }), InvalidInputError],
      [() => windows.admit(session, { segmentId: 'n', tokens: 5, salience: 1.5 }), InvalidInputError],
      [() => windows.admit(session, { segmentId: 'n', tokens: 1001, salience: 0.5 }), InvalidInputError],
      [() => windows.rehydrate(session, { segmentId: 'a', salience: -0.2 }), InvalidInputError],
      [() => windows.pin(session, { segmentId: 'nope', pin: { kind: 'explicit' } }), NotFoundError],
      [() => windows.advanceTurn(session, { scores: { nope: 0.5 } }), NotFoundError],
      [() => windows.rehydrate(session, { segmentId: 'nope', salience: 0.9 }), NotFoundError],
      [() => windows.unpin(session, { segmentId: 'b' }), ConflictError],
      [() => windows.admit(session, { segmentId: 'a', tokens: 600, salience: 0.5 }), ConflictError],
    ];
    for (const [call, errorClass] of cases) expect(await caught(call())).toBeInstanceOf(errorClass);
    expect(await windows.show(session)).toEqual(before);
  });

  it('says NotFound for a session that was never opened and Conflict for different settings', async () => {
    expect(await caught(windows.show(`never-${randomUUID()}`))).toBeInstanceOf(NotFoundError);
    expect(
      await caught(windows.admit(`never-${randomUUID()}`, { segmentId: 'a', tokens: 1, salience: 1 })),
    ).toBeInstanceOf(NotFoundError);
    const session = newSession('reopen');
    await windows.open(session, { capacity: 500 });
    expect((await windows.open(session)).settings.capacity).toBe(500);
    expect(await caught(windows.open(session, { capacity: 600 }))).toBeInstanceOf(ConflictError);
    expect(await caught(windows.open(session, { decay: 2 }))).toBeInstanceOf(InvalidInputError);
  });

  it('makes the same decisions as the pure core for random operation sequences', async () => {
    const segment = fc.constantFrom('s0', 's1', 's2', 's3', 's4');
    const op = fc.oneof(
      fc.record({
        op: fc.constant('admit' as const),
        input: fc.record({
          segmentId: segment,
          tokens: fc.integer({ min: 1, max: 500 }),
          salience: fc.double({ min: 0, max: 1, noNaN: true }),
        }),
      }),
      fc.record({
        op: fc.constant('rehydrate' as const),
        input: fc.record({ segmentId: segment, salience: fc.double({ min: 0.3, max: 1, noNaN: true }) }),
      }),
      fc.record({
        op: fc.constant('pin' as const),
        input: fc.record({ segmentId: segment, pin: fc.constant({ kind: 'explicit' as const }) }),
      }),
      fc.record({ op: fc.constant('unpin' as const), input: fc.record({ segmentId: segment }) }),
      fc.record({ op: fc.constant('advanceTurn' as const), input: fc.constant({}) }),
    );
    const pure: Record<string, (s: WindowState, i: unknown) => Transition<unknown>> = {
      admit,
      rehydrate,
      pin,
      unpin,
      advanceTurn,
    };
    const outcome = async (fn: () => unknown) => {
      try {
        return { ok: await fn() };
      } catch (err) {
        if (!(err instanceof MemgateError)) throw err;
        return { error: err.type, details: err.details };
      }
    };
    await fc.assert(
      fc.asyncProperty(fc.array(op, { minLength: 15, maxLength: 15 }), async (ops) => {
        const session = newSession('model');
        const settings = { capacity: 1000, decay: 0.85, rehydrationThreshold: 0.5, margin: 0.1 };
        await windows.open(session, settings);
        let state = openWindow(settings);
        for (const { op, input } of ops) {
          const expected = await outcome(() => {
            const next = pure[op]!(state, input);
            state = next.state;
            return next.result;
          });
          const actual = await outcome(() =>
            (windows[op] as (s: string, i: unknown) => Promise<unknown>)(session, input),
          );
          expect(actual).toEqual(expected);
        }
        expect(await windows.show(session)).toEqual(viewWindow(state));
      }),
      { numRuns: 3 },
    );
  });
});

describe('the window client with Temporal out of reach', () => {
  it('answers StackUnavailable when Temporal fails as it asks whether a session it did not find was closed', async () => {
    // Temporal answers the call (no such session) and then fails the describe that follows.
    const temporal = env.client.temporal;
    const describeFails = new Proxy(temporal.workflow, {
      get(target, prop, receiver) {
        if (prop !== 'getHandle') return Reflect.get(target, prop, receiver) as unknown;
        return (...args: Parameters<typeof target.getHandle>) => {
          const handle = target.getHandle(...args);
          return new Proxy(handle, {
            get(h, p, r) {
              if (p === 'describe')
                return () => Promise.reject(new ServiceError('describe failed: unavailable'));
              return Reflect.get(h, p, r) as unknown;
            },
          });
        };
      },
    });
    const flaky = new WindowClient(
      new Proxy(temporal, { get: (t, p, r) => (p === 'workflow' ? describeFails : Reflect.get(t, p, r)) }),
      env.config,
    );
    await expect(flaky.show(`s-never-opened-${randomUUID()}`)).rejects.toBeInstanceOf(StackUnavailableError);
  });

  it('answers open, as every other call, with StackUnavailable', async () => {
    const connection = Connection.lazy({ address: '127.0.0.1:1' });
    const unreachable = new WindowClient(
      new Client({ connection, namespace: env.config.temporalNamespace }),
      env.config,
    );
    try {
      await expect(unreachable.show('s-unreachable')).rejects.toBeInstanceOf(StackUnavailableError);
      await expect(unreachable.open('s-unreachable')).rejects.toBeInstanceOf(StackUnavailableError);
    } finally {
      await connection.close();
    }
  }, 120_000);
});
