/**
 * The floor under memgate's write path on a given Temporal server and worker: an Update whose
 * handler runs one local activity that does nothing, the shape of a write's acknowledgement
 * (the Update's activation, the local activity's dispatch and result, the task's completion)
 * with none of memgate's work in it (no codec, no validation, no store). The Update carries
 * the write's entries as written, so the server and the worker move as many bytes of them as
 * they would for a write in clear. bench/write-path times it beside the write path, on the
 * same server and in the same worker process.
 */
import { condition, defineUpdate, proxyLocalActivities, setHandler } from '@temporalio/workflow';

export const floorUpdate = defineUpdate<number, [unknown[]]>('floor');

export interface FloorActivities {
  nothing(entries: unknown[]): Promise<number>;
}

const { nothing } = proxyLocalActivities<FloorActivities>({ startToCloseTimeout: '30 seconds' });

export async function updateFloor(): Promise<void> {
  setHandler(floorUpdate, (entries) => nothing(entries));
  // Held open until the benchmark terminates it.
  await condition(() => false);
}
