import { Worker } from 'node:worker_threads';
import { join } from 'node:path';
import { StackUnavailableError } from '../core/errors';
import type { EngineReplies, EngineReply, EngineRequest } from './protocol';

/**
 * A process's vector engine: one worker thread (vectorEngine/thread.ts) that holds every
 * index of the process, so that usearch's synchronous calls never hold an event loop that
 * serves requests or runs activities. Requests are answered in the order sent.
 */
export class VectorEngine {
  private static shared: VectorEngine | undefined;
  /** Told when an engine's thread stops: every index it held is gone with it. */
  private static readonly stopListeners = new Set<(engine: VectorEngine) => void>();
  private readonly thread: Worker;
  private readonly waiting = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  private nextId = 0;
  private failed: Error | undefined;
  /** When a search was last asked (`performance.now()`): a save waits for a pause (core/indexSaves.ts). */
  lastSearchAt: number | undefined;

  private constructor() {
    // From the sources (tests, a process run by tsx) the thread is TypeScript too.
    const source = __filename.endsWith('.ts');
    this.thread = new Worker(join(__dirname, source ? 'thread.ts' : 'thread.js'), {
      execArgv: source ? ['--require', require.resolve('tsx/cjs')] : [],
    });
    // The thread keeps a process alive only while it owes an answer.
    this.thread.unref();
    this.thread.on('message', (reply: EngineReply) => {
      const w = this.waiting.get(reply.id);
      if (!w) return;
      this.waiting.delete(reply.id);
      if (this.waiting.size === 0) this.thread.unref();
      if (reply.ok) w.resolve(reply.value);
      else w.reject(new Error(`vector engine: ${reply.error}`));
    });
    const fail = (err: Error) => {
      // An 'error' is followed by an 'exit': the first tells.
      if (this.failed) return;
      this.failed = new StackUnavailableError(`the vector engine thread stopped: ${err.message}`);
      for (const w of this.waiting.values()) w.reject(this.failed);
      this.waiting.clear();
      if (VectorEngine.shared === this) VectorEngine.shared = undefined;
      process.emitWarning(
        `${this.failed.message}: each agent's vector index loads again on its next recall`,
        'MemgateWarning',
      );
      for (const listener of VectorEngine.stopListeners) listener(this);
    };
    this.thread.on('error', fail);
    this.thread.on('exit', (code) => fail(new Error(`exit code ${code}`)));
  }

  /** The process's engine, started on first use. */
  static forProcess(): VectorEngine {
    return (VectorEngine.shared ??= new VectorEngine());
  }

  /**
   * Call `listener` when an engine's thread stops (the next `forProcess` starts another);
   * returns what stops the calls.
   */
  static onStopped(listener: (engine: VectorEngine) => void): () => void {
    VectorEngine.stopListeners.add(listener);
    return () => VectorEngine.stopListeners.delete(listener);
  }

  /** Whether its thread has stopped: it holds no index, and answers nothing more. */
  get stopped(): boolean {
    return this.failed !== undefined;
  }

  /** Ask the thread; a Float32Array in the request is transferred (the caller gives it up). */
  request<Op extends EngineRequest['op']>(
    req: Extract<EngineRequest, { op: Op }>,
  ): Promise<EngineReplies[Op]> {
    if (this.failed) return Promise.reject(this.failed);
    if (req.op === 'search') this.lastSearchAt = performance.now();
    const id = this.nextId++;
    const transfer = Object.values(req).flatMap((v) =>
      v instanceof Float32Array && v.byteOffset === 0 && v.byteLength === v.buffer.byteLength
        ? [v.buffer as ArrayBuffer]
        : [],
    );
    return new Promise((resolve, reject) => {
      if (this.waiting.size === 0) this.thread.ref();
      this.waiting.set(id, { resolve: resolve as (v: unknown) => void, reject });
      this.thread.postMessage({ id, req }, transfer);
    });
  }
}
