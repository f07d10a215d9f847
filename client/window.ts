import { WorkflowNotFoundError, type Client } from '@temporalio/client';
import type { UpdateDefinition } from '@temporalio/common';
import type { z } from 'zod';
import type { Config } from '../core/config';
import { ConflictError, NotFoundError } from '../core/errors';
import {
  parseWith,
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
  type WindowView,
} from '../core/window';
import {
  admitUpdate,
  advanceTurnUpdate,
  contextWindow,
  contextWindowWorkflowId,
  pinUpdate,
  rehydrateUpdate,
  unpinUpdate,
  windowQuery,
} from '../workflows/contextWindow';
import { fromTemporalFailure } from './errors';

const overridesSchema = windowSettingsSchema.omit({ pinGuard: true }).partial();
export type WindowOverrides = z.input<typeof overridesSchema>;

/**
 * Context windows of agent sessions, one `contextWindow` workflow each. A session is opened
 * explicitly (`open`), so its settings are fixed in one place; every other call targets an
 * open session and fails with NotFoundError otherwise. Failures come back as the MemgateError
 * they started as: RehydrationBlocked, InvalidInputError, NotFoundError, ConflictError.
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
    const handle = await this.temporal.workflow.start(contextWindow, {
      workflowId: contextWindowWorkflowId(session),
      taskQueue: this.config.taskQueue,
      args: [{ sessionId: session, settings }],
      workflowIdConflictPolicy: 'USE_EXISTING',
    });
    const view = await handle.query(windowQuery);
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

  async show(sessionId: string): Promise<WindowView> {
    const session = parseWith(sessionIdSchema, sessionId, 'session id');
    try {
      return await this.temporal.workflow.getHandle(contextWindowWorkflowId(session)).query(windowQuery);
    } catch (err) {
      throw failure(session, err);
    }
  }

  private async update<R, I>(sessionId: string, update: UpdateDefinition<R, [I]>, input: I): Promise<R> {
    const session = parseWith(sessionIdSchema, sessionId, 'session id');
    try {
      return await this.temporal.workflow
        .getHandle(contextWindowWorkflowId(session))
        .executeUpdate(update, { args: [input] });
    } catch (err) {
      throw failure(session, err);
    }
  }
}

function failure(sessionId: string, err: unknown): unknown {
  if (err instanceof WorkflowNotFoundError) {
    return new NotFoundError(`no open context window for session ${sessionId}: open it first`, { sessionId });
  }
  return fromTemporalFailure(err);
}
