/**
 * The local stack's watchdog: a process of its own (`memgate stack watch`, started by
 * `stack up`) that asks FerretDB, every few seconds, for an answer that needs PostgreSQL, and
 * restarts a FerretDB that has stopped answering, saying so in FerretDB's log and its own.
 * memgate's admission (core/admission.ts) keeps its own commands from wedging the pool; the
 * watchdog is for whatever else stops FerretDB answering.
 */
import { appendFileSync, mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import type { Config } from '../core/config';
import { openStore, type Store } from '../store/db';
import { storeLimitsOf } from '../store/guard';
import { endpoints, restartFerretDb, stackLogFiles, type StackSettings } from './stack';

export interface WatchOptions {
  /** Resolves when the store answers; rejects (or never settles) when it does not. */
  answers: () => Promise<void>;
  /** How long one answer may take. */
  timeoutMs: number;
  /** The pause between two probes. */
  intervalMs: number;
  /** Probes that must fail in a row before a restart. */
  failuresBeforeRestart: number;
  /** Restarts the store; resolves with the new process id. */
  restart: () => Promise<number>;
  log: (line: string) => void;
  signal: AbortSignal;
}

function within(work: Promise<void>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    work,
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

/** `ms`, or less if `signal` aborts; leaves no listener behind either way. */
const pause = (ms: number, signal: AbortSignal) =>
  new Promise<void>((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done, { once: true });
  });

/** Probes until `signal` aborts; returns how many restarts it made. */
export async function watchStore(o: WatchOptions): Promise<number> {
  let failures = 0;
  let restarts = 0;
  while (!o.signal.aborted) {
    try {
      await within(o.answers(), o.timeoutMs);
      failures = 0;
    } catch (err) {
      failures += 1;
      if (failures >= o.failuresBeforeRestart && !o.signal.aborted) {
        const why = `FerretDB did not answer within ${o.timeoutMs} ms ${failures} times in a row (${(err as Error).message})`;
        o.log(`${why}: restarting it`);
        try {
          const pid = await o.restart();
          restarts += 1;
          o.log(`restarted FerretDB (pid ${pid})`);
        } catch (restartErr) {
          o.log(`could not restart FerretDB: ${(restartErr as Error).message}`);
        }
        failures = 0;
      }
    }
    await pause(o.intervalMs, o.signal);
  }
  return restarts;
}

/** A log line in each of these files, stamped. */
export function logTo(...files: string[]): (line: string) => void {
  return (line) => {
    const stamped = `${new Date().toISOString()} [memgate watchdog] ${line}\n`;
    for (const f of files) appendFileSync(f, stamped);
  };
}

/**
 * `memgate stack watch`: supervises the local stack's FerretDB until `signal` aborts. It opens
 * the store like any process (its one probe at a time is within its share of connections).
 */
export async function superviseLocalStack(
  c: StackSettings & Pick<Config, 'database'>,
  signal: AbortSignal,
): Promise<void> {
  const files = stackLogFiles(c);
  mkdirSync(dirname(files.watchdog), { recursive: true });
  const log = logTo(files.watchdog, files.ferretdb);
  let store: Store | undefined;
  const answers = async () => {
    store ??= await openStore(endpoints(c).mongoUri, c.database, storeLimitsOf(c));
    await store.answers();
  };
  log(`watching FerretDB on 127.0.0.1:${c.mongoPort}`);
  try {
    await watchStore({
      answers,
      timeoutMs: c.storeTimeoutMs,
      intervalMs: WATCH_INTERVAL_MS,
      failuresBeforeRestart: WATCH_FAILURES,
      restart: () => restartFerretDb(c, log),
      log,
      signal,
    });
  } finally {
    await store?.close();
  }
}

/** A probe every 5 s; three unanswered in a row (each bounded by the store timeout) restart it. */
const WATCH_INTERVAL_MS = 5_000;
const WATCH_FAILURES = 3;
