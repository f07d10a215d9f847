/**
 * The floor under memgate's write path on a given Temporal server and worker: an Update whose
 * handler runs one local activity that does nothing, the shape of a write's acknowledgement
 * (the Update's activation, the local activity's dispatch and result, the task's completion)
 * with none of memgate's work in it (no codec, no validation, no store). bench/write-path
 * times it beside the write path, on the same server and in the same worker process.
 */
import { condition, defineUpdate, proxyLocalActivities, setHandler } from '@temporalio/workflow';

export const floorUpdate = defineUpdate<number, [number]>('floor');

export interface FloorActivities {
  nothing(n: number): Promise<number>;
}

const { nothing } = proxyLocalActivities<FloorActivities>({ startToCloseTimeout: '30 seconds' });

export async function updateFloor(): Promise<void> {
  setHandler(floorUpdate, (n) => nothing(n));
  // Held open until the benchmark terminates it.
  await condition(() => false);
}
