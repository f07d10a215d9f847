import { encodedBytes, MAX_WRITE_BYTES, type WriteEntry } from './entry';
import { InvalidInputError } from './errors';

type Send<R> = (agentId: string, entries: WriteEntry[]) => Promise<R[]>;

interface Waiting<R> {
  entries: WriteEntry[];
  /**
   * As the entries are sealed, parsed and dated (`encodedBytes`): the workflow takes an Update
   * of at most MAX_WRITE_BYTES of them (core/sealed.ts, maxSealedChars).
   */
  bytes: number;
  resolve: (result: R[]) => void;
  reject: (err: unknown) => void;
}

/**
 * Coalesces concurrent writes for one agent into fewer Updates: the first write goes out at
 * once; writes that arrive while it is in flight ride together in the next Update (up to
 * the per-write entry limit and MAX_WRITE_BYTES), and so do those its answered callers make
 * at once. No timer, so an idle agent's write pays no extra latency, and each caller is
 * answered with exactly its own entries once they are durable, or with its own refusal.
 */
export class WriteCoalescer<R> {
  private readonly queues = new Map<string, { waiting: Waiting<R>[]; inFlight: boolean }>();

  constructor(
    private readonly send: Send<R>,
    private readonly maxEntries: number,
  ) {}

  write(agentId: string, entries: WriteEntry[]): Promise<R[]> {
    let queue = this.queues.get(agentId);
    if (!queue) {
      queue = { waiting: [], inFlight: false };
      this.queues.set(agentId, queue);
    }
    const bytes = entries.reduce((n, e) => n + encodedBytes(e), 0);
    const result = new Promise<R[]>((resolve, reject) =>
      queue.waiting.push({ entries, bytes, resolve, reject }),
    );
    if (!queue.inFlight) void this.drain(agentId, queue);
    return result;
  }

  private async drain(agentId: string, queue: { waiting: Waiting<R>[]; inFlight: boolean }): Promise<void> {
    queue.inFlight = true;
    while (queue.waiting.length > 0) {
      const batch: Waiting<R>[] = [];
      let size = 0;
      let bytes = 0;
      while (
        queue.waiting.length > 0 &&
        (batch.length === 0 ||
          (size + queue.waiting[0]!.entries.length <= this.maxEntries &&
            // The request's envelope (agent id, brackets) is well inside the margin left.
            bytes + queue.waiting[0]!.bytes <= MAX_WRITE_BYTES - 1024))
      ) {
        const next = queue.waiting.shift()!;
        batch.push(next);
        size += next.entries.length;
        bytes += next.bytes;
      }
      try {
        const persisted = await this.send(
          agentId,
          batch.flatMap((w) => w.entries),
        );
        let offset = 0;
        for (const w of batch) {
          w.resolve(persisted.slice(offset, offset + w.entries.length));
          offset += w.entries.length;
        }
      } catch (err) {
        // Refused for what the writes ask together (the workflow's limits may be lower than
        // this client's, read from the stored policy before it changed), the refusal is not
        // each caller's: each is sent again alone and answered for itself.
        if (batch.length > 1 && err instanceof InvalidInputError) {
          for (const w of batch) await this.send(agentId, w.entries).then(w.resolve, w.reject);
        } else for (const w of batch) w.reject(err);
      }
      // One turn of the event loop before the next batch: the callers just answered write
      // again in it (their continuations run first), and ride with those already waiting
      // instead of in an Update of their own. Without it a closed loop of 32 writers split
      // into Updates of 16, which cost the servers per Update (docs/benchmarks.md, write-path).
      await new Promise<void>((resolve) => setImmediate(resolve));
    }
    queue.inFlight = false;
    this.queues.delete(agentId);
  }
}
