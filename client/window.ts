import { WorkflowNotFoundError, type Client, type WorkflowHandle } from '@temporalio/client';
import type { UpdateDefinition } from '@temporalio/common';
import type { z } from 'zod';
import { allWithin } from '../core/allWithin';
import type { Config } from '../core/config';
import { ConflictError, NotFoundError, StackUnavailableError } from '../core/errors';
import {
  parseWith,
  sessionClosed,
  sessionIdSchema,
  windowSettingsSchema,
  type AdmitInput,
  type AdvanceTurnInput,
  type EntryResult,
  type PinInput,
  type RehydrateInput,
  type Segment,
  type TurnResult,
  type UnpinInput,
  type UnpinResult,
  type WindowSummary,
  type WindowView,
} from '../core/window';
import {
  admitUpdate,
  advanceTurnUpdate,
  closeUpdate,
  contextWindow,
  contextWindowWorkflowId,
  pinUpdate,
  rehydrateUpdate,
  unpinUpdate,
  windowQuery,
} from '../workflows/contextWindow';
import { toMemgateError } from './errors';
import { resending } from './resend';

const overridesSchema = windowSettingsSchema.omit({ pinGuard: true, retainedEvictions: true }).partial();
export type WindowOverrides = z.input<typeof overridesSchema>;

/**
 * Context windows of agent sessions, one `contextWindow` workflow each. A session is opened
 * explicitly (`open`), so its settings are fixed in one place; every other call targets an
 * open session and fails with NotFoundError otherwise, or ConflictError once it is closed.
 * Failures come back as the MemgateError they started as: RehydrationBlocked,
 * InvalidInputError, NotFoundError, ConflictError.
 */
export class WindowClient {
  constructor(
    private readonly temporal: Client,
    private readonly config: Config,
  ) {}

  /**
   * Starts the session's window with the configured defaults and `overrides`, or returns the
   * open one; an override that differs from an open session's setting is a ConflictError.
   */
  async open(sessionId: string, overrides: WindowOverrides = {}): Promise<WindowView> {
    const session = parseWith(sessionIdSchema, sessionId, 'session id');
    const explicit = parseWith(overridesSchema, overrides, 'window settings');
    const settings = parseWith(
      windowSettingsSchema,
      {
        capacity: this.config.windowTokens,
        decay: this.config.windowDecay,
        rehydrationThreshold: this.config.rehydrationThreshold,
        margin: this.config.rehydrationMargin,
        ...explicit,
      },
      'window settings',
    );
    let view: WindowView;
    try {
      const handle = await this.temporal.workflow.start(contextWindow, {
        workflowId: contextWindowWorkflowId(session),
        taskQueue: this.config.taskQueue,
        args: [{ sessionId: session, settings }],
        workflowIdConflictPolicy: 'USE_EXISTING',
      });
      view = await handle.query(windowQuery);
    } catch (err) {
      // Typed, as every other call's failure (an unreachable server is StackUnavailable).
      throw toMemgateError(err);
    }
    const differing = (Object.keys(explicit) as (keyof WindowOverrides)[]).filter(
      (k) => view.settings[k] !== explicit[k],
    );
    if (differing.length) {
      throw new ConflictError(
        `session ${session} is already open with ${differing.map((k) => `${k}=${view.settings[k]}`).join(', ')}`,
        { sessionId: session, settings: view.settings },
      );
    }
    return view;
  }

  admit(sessionId: string, input: AdmitInput): Promise<EntryResult> {
    return this.update(sessionId, admitUpdate, input);
  }

  /** Brings an evicted segment back, or throws RehydrationBlocked saying why not. */
  rehydrate(sessionId: string, input: RehydrateInput): Promise<EntryResult> {
    return this.update(sessionId, rehydrateUpdate, input);
  }

  pin(sessionId: string, input: PinInput): Promise<Segment> {
    return this.update(sessionId, pinUpdate, input);
  }

  unpin(sessionId: string, input: UnpinInput): Promise<UnpinResult> {
    return this.update(sessionId, unpinUpdate, input);
  }

  advanceTurn(sessionId: string, input: AdvanceTurnInput = {}): Promise<TurnResult> {
    return this.update(sessionId, advanceTurnUpdate, input);
  }

  /** The window as it is, or as it was left at the close. */
  show(sessionId: string): Promise<WindowView> {
    return this.call(sessionId, (handle) => handle.query(windowQuery));
  }

  /**
   * Ends the session: its workflow completes with the summary returned here, and every later
   * call but `show` is a ConflictError until the session is opened again, with an empty window.
   */
  close(sessionId: string): Promise<WindowSummary> {
    return this.call(sessionId, (handle) => handle.executeUpdate(closeUpdate));
  }

  private update<R, I>(sessionId: string, update: UpdateDefinition<R, [I]>, input: I): Promise<R> {
    return this.call(sessionId, (handle) => handle.executeUpdate(update, { args: [input] }));
  }

  private async call<R>(
    sessionId: string,
    fn: (handle: WorkflowHandle<typeof contextWindow>) => Promise<R>,
  ): Promise<R> {
    const session = parseWith(sessionIdSchema, sessionId, 'session id');
    const handle = this.temporal.workflow.getHandle<typeof contextWindow>(contextWindowWorkflowId(session));
    try {
      // A call the server aborted before the session's run took it is sent again (client/resend.ts).
      return await resending(
        () => fn(handle),
        (reason, attempts) =>
          new StackUnavailableError(
            `the call to session ${session} was turned away ${attempts} times (${reason})`,
            {
              sessionId: session,
            },
          ),
      );
    } catch (err) {
      throw await failure(session, handle, err);
    }
  }
}

/** An Update reaches no run once the workflow has ended: closed (completed) or never opened. */
async function failure(
  sessionId: string,
  handle: WorkflowHandle<typeof contextWindow>,
  err: unknown,
): Promise<unknown> {
  if (!(err instanceof WorkflowNotFoundError)) return toMemgateError(err);
  if (await wasClosed(handle)) return sessionClosed(sessionId);
  return new NotFoundError(`no open context window for session ${sessionId}: open it first`, { sessionId });
}

async function wasClosed(handle: WorkflowHandle<typeof contextWindow>): Promise<boolean> {
  try {
    return (await handle.describe()).status.name === 'COMPLETED';
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) return false;
    throw toMemgateError(err);
  }
}

/** How many sessions `openSessions` describes at once. */
const DESCRIBES_AT_ONCE = 8;

/**
 * Which of these sessions have a window open. A session the server cannot describe now counts
 * as open: a quota place is given back only when nothing holds it.
 */
export async function openSessions(temporal: Client, sessionIds: readonly string[]): Promise<Set<string>> {
  const open = await allWithin(sessionIds, DESCRIBES_AT_ONCE, async (sessionId) => {
    try {
      const { status } = await temporal.workflow.getHandle(contextWindowWorkflowId(sessionId)).describe();
      return status.name === 'RUNNING';
    } catch (err) {
      return !(err instanceof WorkflowNotFoundError);
    }
  });
  return new Set(sessionIds.filter((_, i) => open[i]));
}
