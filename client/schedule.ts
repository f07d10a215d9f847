import { temporalConnectionOptions } from '../stack/connection';
import { toMemgateError } from './errors';
import {
  Client,
  Connection,
  ScheduleAlreadyRunning,
  ScheduleNotFoundError,
  ScheduleOverlapPolicy,
  type ScheduleDescription,
  type ScheduleOptions,
} from '@temporalio/client';
import type { Config } from '../core/config';
import { InvalidInputError, NotFoundError } from '../core/errors';
import { nightlyConsolidation } from '../workflows/nightly';

export const NIGHTLY_SCHEDULE_ID = 'memgate-nightly';

type NightlyConfig = Pick<Config, 'taskQueue' | 'nightlyAt' | 'nightlyTimezone' | 'nightlyCatchupHours'>;

/** The Schedule as configured: a calendar time in a time zone, overlap SKIP, a catch-up window. */
export function nightlyScheduleOptions(
  config: NightlyConfig,
  scheduleId = NIGHTLY_SCHEDULE_ID,
): ScheduleOptions {
  const [hour, minute] = config.nightlyAt.split(':').map(Number) as [number, number];
  return {
    scheduleId,
    spec: {
      calendars: [{ hour, minute, comment: `nightly consolidation at ${config.nightlyAt}` }],
      timezone: config.nightlyTimezone,
    },
    action: {
      type: 'startWorkflow',
      workflowType: nightlyConsolidation,
      workflowId: scheduleId,
      taskQueue: config.taskQueue,
      args: [{}],
    },
    policies: {
      overlap: ScheduleOverlapPolicy.SKIP,
      catchupWindow: `${config.nightlyCatchupHours} hours`,
    },
  };
}

export interface ScheduleSummary {
  scheduleId: string;
  paused: boolean;
  note?: string;
  calendar: string;
  timezone?: string;
  overlap?: string;
  catchupWindowMs: number;
  taskQueue?: string;
  nextRuns: string[];
  recentRuns: { scheduledAt: string; workflowId: string }[];
  runningWorkflows: string[];
}

function summarise(d: ScheduleDescription): ScheduleSummary {
  const calendar = d.spec.calendars?.[0];
  const summary: ScheduleSummary = {
    scheduleId: d.scheduleId,
    paused: d.state.paused,
    calendar: calendar
      ? `${String(calendar.hour?.[0]?.start ?? 0).padStart(2, '0')}:${String(calendar.minute?.[0]?.start ?? 0).padStart(2, '0')}`
      : 'none',
    catchupWindowMs: d.policies.catchupWindow,
    nextRuns: d.info.nextActionTimes.slice(0, 3).map((t) => t.toISOString()),
    recentRuns: d.info.recentActions.map((a) => ({
      scheduledAt: a.scheduledAt.toISOString(),
      workflowId: a.action.workflow.workflowId,
    })),
    runningWorkflows: d.info.runningActions.map((a) => a.workflow.workflowId),
  };
  if (d.policies.overlap) summary.overlap = d.policies.overlap;
  if (d.state.note) summary.note = d.state.note;
  if (d.spec.timezone) summary.timezone = d.spec.timezone;
  if (d.action.type === 'startWorkflow') summary.taskQueue = d.action.taskQueue;
  return summary;
}

/**
 * The nightly Schedule (`memgate-nightly`). `ensure` is idempotent: it creates the Schedule,
 * or brings an existing one's calendar, policies and action in line with the configuration
 * while leaving its paused state alone — so `npm start` can call it every time.
 */
export class NightlySchedule {
  constructor(
    private readonly temporal: Client,
    private readonly config: NightlyConfig,
    readonly scheduleId = NIGHTLY_SCHEDULE_ID,
  ) {}

  private handle() {
    return this.temporal.schedule.getHandle(this.scheduleId);
  }

  private async guard<T>(fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      if (err instanceof ScheduleNotFoundError) {
        throw new NotFoundError(
          `no schedule ${this.scheduleId}: create it with \`memgate schedule create\``,
          {
            scheduleId: this.scheduleId,
          },
        );
      }
      throw toMemgateError(err);
    }
  }

  async ensure(): Promise<{ scheduleId: string; action: 'created' | 'updated' }> {
    const options = nightlyScheduleOptions(this.config, this.scheduleId);
    try {
      await this.temporal.schedule.create(options);
      return { scheduleId: this.scheduleId, action: 'created' };
    } catch (err) {
      if (!(err instanceof ScheduleAlreadyRunning)) throw toMemgateError(err);
    }
    await this.guard(() =>
      this.handle().update((previous) => ({
        ...previous,
        spec: options.spec,
        action: options.action,
        policies: { ...previous.policies, ...options.policies },
      })),
    );
    return { scheduleId: this.scheduleId, action: 'updated' };
  }

  async describe(): Promise<ScheduleSummary> {
    return this.guard(async () => summarise(await this.handle().describe()));
  }

  async pause(note = 'paused with memgate schedule pause'): Promise<ScheduleSummary> {
    return this.guard(async () => {
      await this.handle().pause(note);
      return summarise(await this.handle().describe());
    });
  }

  async unpause(note = 'unpaused with memgate schedule unpause'): Promise<ScheduleSummary> {
    return this.guard(async () => {
      await this.handle().unpause(note);
      return summarise(await this.handle().describe());
    });
  }

  /** Run now (skipped, like any run, while one is still going). */
  async trigger(): Promise<void> {
    await this.guard(() => this.handle().trigger(ScheduleOverlapPolicy.SKIP));
  }

  /** Take the runs the Schedule would have taken between `start` and `end` (each with its own night as asOf). */
  async backfill(start: Date, end: Date): Promise<void> {
    if (!(start.getTime() < end.getTime())) {
      throw new InvalidInputError('backfill needs a start before its end', [
        { path: 'start', message: 'must be before end' },
      ]);
    }
    await this.guard(() => this.handle().backfill({ start, end, overlap: ScheduleOverlapPolicy.BUFFER_ALL }));
  }
}

/** What `npm start` runs: connect, create or update the nightly Schedule, disconnect. */
export async function ensureNightlySchedule(
  config: NightlyConfig & Config,
  temporalAddress: string,
): Promise<{ scheduleId: string; action: 'created' | 'updated' }> {
  const connection = await Connection.connect(temporalConnectionOptions(config, temporalAddress));
  try {
    const temporal = new Client({ connection, namespace: config.temporalNamespace });
    return await new NightlySchedule(temporal, config).ensure();
  } finally {
    await connection.close();
  }
}
