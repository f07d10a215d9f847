import type { MemgateClient } from '../client/client';
import type { ImpossibleReport } from '../server/schemas';

export type { ImpossibleReport };

/**
 * The memory browser's calls: the same HTTP API any client calls, with the key the operator
 * entered, kept in this tab's session storage and sent as `Authorization: Bearer` on each call.
 */

type Result<M extends keyof MemgateClient> = MemgateClient[M] extends (...args: never[]) => Promise<infer R>
  ? R
  : never;

export type AgentList = Result<'agents'>;
export type AgentView = Result<'agent'>;
export type NightList = Result<'nights'>;
export type Night = NightList['nights'][number];
export type EntryList = Result<'entries'>;
export type EntryView = Result<'entry'>;
export type RecallResult = Result<'recall'>;
export type RecallHit = RecallResult['hits'][number];
export type VerifyReport = Result<'verify'>;
export type ForgetResult = Result<'forget'>;
export type RestoreResult = Result<'restore'>;
export type AuditRun = Result<'lastAudit'>;

const KEY = 'memgate.apiKey';
const listeners = new Set<(refusal?: string) => void>();

/**
 * The key of this tab. A call the server refuses for its key (401) ends the session, with
 * why, so no view shows data under a key that is not accepted.
 */
export const session = {
  key: (): string | null => sessionStorage.getItem(KEY),
  signIn: (key: string) => {
    sessionStorage.setItem(KEY, key);
    for (const listener of listeners) listener();
  },
  signOut: (refusal?: string) => {
    sessionStorage.removeItem(KEY);
    for (const listener of listeners) listener(refusal);
  },
  /** Told of each sign-in and sign-out (with why, when the server refused the key). */
  listen: (listener: (refusal?: string) => void) => {
    listeners.add(listener);
    return () => void listeners.delete(listener);
  },
};

/** An answer other than a success: the API's typed error (its `type`), or no answer at all. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly type: string,
    message: string,
  ) {
    super(message);
  }
}

/** Calls at once: the server answers a few per key at a time (MEMGATE_HTTP_IN_FLIGHT_PER_KEY, 4 by default). */
const AT_ONCE = 3;
/** Times a call refused with 429 is tried again, after the wait the server asks for. */
const RETRIES = 3;

let running = 0;
const waiting: (() => void)[] = [];

async function turn<T>(call: () => Promise<T>): Promise<T> {
  if (running >= AT_ONCE) await new Promise<void>((resolve) => waiting.push(resolve));
  running++;
  try {
    return await call();
  } finally {
    running--;
    waiting.shift()?.();
  }
}

async function send<T>(method: string, path: string, body?: unknown): Promise<T> {
  const key = session.key();
  if (!key) throw new ApiError(401, 'Unauthenticated', 'Enter an API key to continue.');
  for (let attempt = 0; ; attempt++) {
    let response: Response;
    try {
      response = await turn(() =>
        fetch(path, {
          method,
          headers: {
            authorization: `Bearer ${key}`,
            ...(body !== undefined && { 'content-type': 'application/json' }),
          },
          ...(body !== undefined && { body: JSON.stringify(body) }),
        }),
      );
    } catch {
      throw new ApiError(0, 'Unreachable', 'memgate did not answer: is `memgate serve` running?');
    }
    if (response.ok) return (await response.json()) as T;
    const { error } = (await response.json().catch(() => ({}))) as {
      error?: { type?: string; message?: string };
    };
    if (response.status === 401) session.signOut(error?.message ?? 'the key is not accepted');
    if (response.status === 429 && attempt < RETRIES) {
      const seconds = Number(response.headers.get('retry-after') ?? '1');
      await new Promise((resolve) => setTimeout(resolve, Math.min(10, Math.max(1, seconds)) * 1000));
      continue;
    }
    throw new ApiError(
      response.status,
      error?.type ?? 'Internal',
      error?.message ?? `memgate answered ${response.status}`,
    );
  }
}

const agentPath = (agentId: string) => `/v1/agents/${encodeURIComponent(agentId)}`;
const query = (params: Record<string, string | number | undefined>) => {
  const defined = Object.entries(params).filter(([, v]) => v !== undefined) as [string, string][];
  return defined.length ? `?${new URLSearchParams(defined.map(([k, v]) => [k, String(v)])).toString()}` : '';
};

export const api = {
  agents: (after?: string) => send<AgentList>('GET', `/v1/agents${query({ after })}`),
  agent: (agentId: string) => send<AgentView>('GET', agentPath(agentId)),
  nights: (agentId: string, before?: number) =>
    send<NightList>('GET', `${agentPath(agentId)}/nights${query({ before })}`),
  entries: (agentId: string, cursor?: string) =>
    send<EntryList>('GET', `${agentPath(agentId)}/memories${query({ cursor })}`),
  entry: (agentId: string, entryId: string) =>
    send<EntryView>('GET', `${agentPath(agentId)}/memories/${encodeURIComponent(entryId)}`),
  recall: (agentId: string, text: string, deep: boolean) =>
    send<RecallResult>('POST', `${agentPath(agentId)}/recall`, { query: text, k: 10, deep }),
  forget: (agentId: string, entryId: string) =>
    send<ForgetResult>('DELETE', `${agentPath(agentId)}/memories/${encodeURIComponent(entryId)}`),
  restore: (agentId: string, entryId: string, freshUntil?: number) =>
    send<RestoreResult>(
      'POST',
      `${agentPath(agentId)}/memories/${encodeURIComponent(entryId)}/restore`,
      freshUntil === undefined ? {} : { freshUntil },
    ),
  impossible: (agentId: string) => send<ImpossibleReport>('GET', `/v1/impossible${query({ agentId })}`),
  verify: (agentId: string) => send<VerifyReport>('GET', `/v1/verify${query({ agentId })}`),
  audit: () => send<AuditRun>('GET', '/v1/audit'),
};
