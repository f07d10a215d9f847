import { readdirSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { historyFromJSON } from '@temporalio/common/lib/proto-utils';
import { DefaultLogger, Runtime, Worker, type History, type ReplayResult } from '@temporalio/worker';
import { DeterminismViolationError } from '@temporalio/workflow';
import { describe, expect, it } from 'vitest';
import * as workflows from '../../workflows';
import { memgateAudit } from '../../audit/workflow';

/**
 * The deploy guard (docs/versioning.md): histories that earlier code wrote, committed under
 * test/histories/ by scripts/record-histories.ts, replay on today's workflow code with no
 * server and no key. A change that would wedge a live run fails here first.
 */
// The replay workers' own lifecycle lines say nothing a failed assertion does not.
Runtime.install({ logger: new DefaultLogger('WARN') });

const HISTORIES = resolve(__dirname, '..', 'histories');
const WORKFLOWS = resolve(__dirname, '..', '..', 'workflows', 'index.ts');
const AUDIT_WORKFLOW = resolve(__dirname, '..', '..', 'audit', 'workflow.ts');
const CHANGES = resolve(__dirname, '..', 'fixtures', 'workflow-changes');

interface Recorded {
  file: string;
  workflowType: string;
  history: History;
}

const recorded: Recorded[] = readdirSync(HISTORIES)
  .filter((f) => f.endsWith('.json'))
  .sort()
  .map((file) => {
    const history = historyFromJSON(JSON.parse(readFileSync(resolve(HISTORIES, file), 'utf8')));
    const started = history.events?.[0]?.workflowExecutionStartedEventAttributes;
    return { file, workflowType: started?.workflowType?.name ?? '', history };
  });

/** Each history replayed on the workflow code at `workflowsPath`, by file name. */
async function replay(workflowsPath: string, of: Recorded[]): Promise<Map<string, ReplayResult>> {
  const results = new Map<string, ReplayResult>();
  const iterable = of.map((r) => ({ workflowId: r.file, history: r.history }));
  for await (const result of Worker.runReplayHistories({ workflowsPath }, iterable)) {
    results.set(result.workflowId, result);
  }
  return results;
}

const ofType = (...types: string[]) => recorded.filter((r) => types.includes(r.workflowType));
const production = recorded.filter((r) => r.workflowType !== memgateAudit.name);

describe('committed workflow histories', () => {
  it('cover every workflow type, in the states the recorder drives them to', () => {
    const types = new Set(recorded.map((r) => r.workflowType));
    for (const workflow of [...Object.values(workflows), memgateAudit]) {
      expect(types, `no history of ${workflow.name}`).toContain(workflow.name);
    }
    // A hand-over (continue-as-new) of the forever-running workflows, and retried activities.
    const ended = (r: Recorded) => Object.keys(r.history.events?.at(-1) ?? {});
    expect(
      ofType('agentMemory').some((r) =>
        ended(r).some((k) => k.startsWith('workflowExecutionContinuedAsNew')),
      ),
    ).toBe(true);
    const attempts = ofType('consolidateAgent').flatMap((r) =>
      (r.history.events ?? []).map((e) => e.activityTaskStartedEventAttributes?.attempt ?? 0),
    );
    expect(Math.max(...attempts)).toBeGreaterThan(1);
  });

  // A recorded failure carries its stack trace: it must not name where the recorder's
  // checkout was (scripts/record-histories.ts makes the paths relative).
  it('name the files of their stack traces relative to the repository', () => {
    const traces = recorded.flatMap(({ file }) =>
      [...readFileSync(resolve(HISTORIES, file), 'utf8').matchAll(/"stackTrace": "([^"]*)"/g)].map(
        (m) => `${file}: ${m[1]}`,
      ),
    );
    expect(traces.length).toBeGreaterThan(0);
    expect(traces.filter((t) => /\(\/|at \//.test(t))).toEqual([]);
  });

  it('replay on the current workflow code', async () => {
    const results = new Map([
      ...(await replay(WORKFLOWS, production)),
      ...(await replay(AUDIT_WORKFLOW, ofType(memgateAudit.name))),
    ]);
    expect(results.size).toBe(recorded.length);
    for (const [file, result] of results) expect(result.error, file).toBeUndefined();
  });

  it('fail on a timer added to agentMemory, and replay once it is behind patched()', async () => {
    const agent = ofType('agentMemory');
    const broken = await replay(resolve(CHANGES, 'timerAdded.ts'), agent);
    for (const [file, result] of broken) {
      expect(result.error, file).toBeInstanceOf(DeterminismViolationError);
    }
    const patched = await replay(resolve(CHANGES, 'timerPatched.ts'), agent);
    for (const [file, result] of patched) expect(result.error, file).toBeUndefined();
  });

  it('fail on activity calls reordered in forget', async () => {
    const forget = ofType('forget');
    const results = await replay(resolve(CHANGES, 'stepsReordered.ts'), forget);
    expect(results.size).toBe(forget.length);
    for (const [file, result] of results) {
      expect(result.error, file).toBeInstanceOf(DeterminismViolationError);
    }
  });
});
