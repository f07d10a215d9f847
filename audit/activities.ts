import { REFERENCE_PASSAGES } from '../core/referencePassages';
import type { QuestionRef } from './messages';
import { activityInfo, Context, heartbeat } from '@temporalio/activity';
import {
  armPolicy,
  classify,
  READ_CONDITIONS,
  type AuditArm,
  type AuditRecord,
  type ReadCondition,
  type ReadSetting,
  type TightnessChecks,
} from './records';
import {
  chronological,
  placeboFor,
  planReclaimToBudget,
  readContext,
  retainByImportance,
  retainFifo,
  retainGoldControl,
  retainRandom,
  retainRedundancyAware,
  totalTokens,
  withRestored,
  type ContextUnit,
  type MemoryUnit,
  type SemanticView,
} from './arms';
import type { Config } from '../core/config';
import { buildEntry, memoryPolicy, type Entry, type MemoryPolicy } from '../core/entry';
import { InvalidInputError, StackUnavailableError } from '../core/errors';
import { parseInput } from '../core/messages';
import {
  auditArmTaskSchema,
  auditListSchema,
  auditQuestionTaskSchema,
  type AuditArmTask,
  type AuditQuestionTask,
} from './messages';
import { reclaimPolicy } from '../core/nightly/reclaim';
import { chooseJudge, chooseReader, createEmbedder, type EmbeddingsEndpoint, type Models } from '../llm';
import { openEmbeddingCache, type EmbeddingCache } from '../llm/embeddingCache';
import type { Judge, Reader } from '../llm/models';
import { agentEntries, dropAgents, saveAuditRecords, storedAuditRecordIds } from '../store/audit';
import { evictEntry, spillEntries } from '../store/nightly';
import type { Store } from '../store/db';
import { entryId } from '../core/ids';
import { insertNewEntries } from '../store/entries';
import {
  haystackTurns,
  listQuestions,
  loadQuestion,
  parseLongMemEvalDate,
  unitId,
  type HaystackTurn,
  type LongMemEvalQuestion,
} from './longMemEval';

/** The restore-counterfactual audit's activities. */

const HAYSTACKS_KEPT = 4;

export interface PreparedQuestion {
  units: number;
  tokens: number;
  goldUnits: number;
  /** The reader answers it when handed only the clean gold: the denominator filter. */
  cleanGold: boolean;
}

export interface ArmOutcome {
  records: number;
  /** Every record was already stored (a rerun of the same run id). */
  reused: boolean;
}

export function auditAgentId(runId: string, questionId: string, memgateBudget?: number): string {
  const base = `audit.${runId}.${questionId.replace(/[^A-Za-z0-9._:-]/g, '-')}`;
  return memgateBudget === undefined ? base : `${base}.memgate-${memgateBudget}`;
}

function entriesFor(agentId: string, turns: HaystackTurn[], policy: MemoryPolicy): Entry[] {
  return turns.map((t) =>
    buildEntry(
      entryId(agentId, { idempotencyKey: t.unitId }),
      agentId,
      {
        text: t.text,
        kind: 'episode',
        salience: 0.5,
        idempotencyKey: t.unitId,
        source: { origin: t.role === 'user' ? 'user' : 'agent', sessionId: t.sessionId, turn: t.turn },
        writtenAt: t.at,
        confidence: 0.5,
        verified: false,
        volatile: false,
      },
      policy,
    ),
  );
}

function unitOf(e: Entry): MemoryUnit {
  const sessionId = e.source.sessionId ?? '';
  const turn = e.source.turn ?? 0;
  return {
    id: unitId(sessionId, turn),
    sessionId,
    turn,
    role: e.source.origin === 'user' ? 'user' : 'assistant',
    at: e.writtenAt,
    tokens: e.tokens,
    text: e.text,
  };
}

interface Asked {
  answer: string;
  correct: boolean;
}

/** Everything one question's arm needs, read once per activity. */
interface QuestionSetup {
  task: AuditQuestionTask;
  q: LongMemEvalQuestion;
  turns: HaystackTurn[];
  /** The haystack as memgate's store holds it for this question's agent. */
  units: MemoryUnit[];
  goldIds: Set<string>;
  gold: MemoryUnit[];
  /** Unrelated text for the placebo: turns outside the gold sessions. */
  filler: MemoryUnit[];
  sessionDates: Map<string, string>;
  /** With `--ranker hybrid`: the vectors the hybrid ranker reads. */
  semantic: SemanticView | undefined;
  reader: Reader;
  judge: Judge;
  asked: Map<string, Asked>;
}

export function createAuditActivities(
  store: Store,
  config: Config,
  models: Models,
  embeddings: EmbeddingsEndpoint,
  embeddingCacheDir: string,
) {
  // The audit's agents are its own, on its own task queue (the nightly run never touches
  // them), and one process runs it: the auditing operator's settings decide for them.
  const policy = memoryPolicy(config);
  const embedder = 'queryUrls' in embeddings ? createEmbedder(config, embeddings) : undefined;
  let vectors: EmbeddingCache | undefined;

  /**
   * The hybrid ranker's vectors for one question: its own and every unit's, embedded once
   * per text and model (llm/embeddingCache.ts), so the arms after the first embed nothing.
   */
  async function semanticView(
    task: AuditQuestionTask,
    question: string,
    units: readonly MemoryUnit[],
    progress: () => void,
  ): Promise<SemanticView | undefined> {
    if (task.settings.ranker === 'bm25') return undefined;
    if (!embedder)
      throw new StackUnavailableError(
        `the audit's hybrid ranker needs embeddings: ${(embeddings as { unavailable: string }).unavailable}`,
      );
    vectors ??= openEmbeddingCache(embeddingCacheDir, embedder.model, embedder.dimensions);
    await vectors.fill(embedder, 'query', [question]);
    await vectors.fill(embedder, 'passage', [...units.map((u) => u.text), ...REFERENCE_PASSAGES], progress);
    const cache = vectors;
    return {
      query: cache.get('query', question)!,
      vectors: new Map(units.map((u) => [u.id, cache.get('passage', u.text)!])),
      reference: REFERENCE_PASSAGES.map((p) => cache.get('passage', p)!),
    };
  }
  /** Writes the haystack into the agent's hot tier; returns the entries it holds there. */
  async function ingest(agentId: string, turns: HaystackTurn[]): Promise<Entry[]> {
    const built = entriesFor(agentId, turns, policy);
    const status = await insertNewEntries(store, built);
    // A first ingest wrote exactly these; a repeated one may meet moved entries, so read back.
    return [...status.values()].every((x) => x === 'created') ? built : agentEntries(store, agentId, 'hot');
  }

  /** The last few haystacks this worker read, since every arm of a question reads the same one. */
  const haystacks = new Map<string, MemoryUnit[]>();
  async function haystack(agentId: string, turns: HaystackTurn[]): Promise<MemoryUnit[]> {
    const known = haystacks.get(agentId);
    if (known) return known;
    let entries = await agentEntries(store, agentId, 'hot');
    if (entries.length < turns.length) entries = await ingest(agentId, turns);
    const units = chronological(entries.map(unitOf));
    haystacks.set(agentId, units);
    if (haystacks.size > HAYSTACKS_KEPT) haystacks.delete(haystacks.keys().next().value!);
    return units;
  }

  /** `progress` is called while the hybrid ranker's vectors are embedded (a heartbeat). */
  async function setup(task: AuditQuestionTask, progress: () => void): Promise<QuestionSetup> {
    const q = loadQuestion(task.ref);
    const turns = haystackTurns(q);
    const units = await haystack(auditAgentId(task.runId, q.question_id), turns);
    const goldIds = new Set(turns.filter((t) => t.gold).map((t) => t.unitId));
    if (goldIds.size === 0) throw new InvalidInputError(`question ${q.question_id} has no evidence turns`);
    const goldSessions = new Set(q.answer_session_ids);
    return {
      task,
      q,
      turns,
      units,
      goldIds,
      gold: units.filter((u) => goldIds.has(u.id)),
      filler: units.filter((u) => !goldSessions.has(u.sessionId)),
      sessionDates: new Map(turns.map((t) => [t.sessionId, t.sessionDate])),
      semantic: await semanticView(task, q.question, units, progress),
      reader: chooseReader(models, task.settings.reader),
      judge: chooseJudge(models, task.settings.judge),
      asked: new Map(),
    };
  }

  /** One reader call and its judgement; identical contexts within an activity are asked once. */
  async function ask(s: QuestionSetup, context: ContextUnit[]): Promise<Asked> {
    const key = context.map((u) => (u.truncated ? `${u.id}~` : u.id)).join('|');
    const known = s.asked.get(key);
    if (known) return known;
    const answer = await s.reader.answer({
      question: s.q.question,
      questionDate: s.q.question_date,
      snippets: context.map((u) => ({
        id: u.id,
        text: u.text,
        date: s.sessionDates.get(u.sessionId) ?? '',
        role: u.role,
        ...(u.truncated ? { truncated: true } : {}),
      })),
      reference: { answer: s.q.answer, evidenceIds: [...s.goldIds] },
    });
    const asked = {
      answer,
      correct: await s.judge.correct({ question: s.q.question, reference: s.q.answer, response: answer }),
    };
    s.asked.set(key, asked);
    return asked;
  }

  interface View {
    readSetting: ReadSetting;
    reachable: MemoryUnit[];
    /** Units the arm keeps nowhere: what a restore would have to bring back from outside it. */
    deleted: Set<string>;
  }

  function retained(s: QuestionSetup, keep: Set<string>): View[] {
    return [
      {
        readSetting: 'retained',
        reachable: s.units.filter((u) => keep.has(u.id)),
        // A classic policy keeps nothing beside what it retains.
        deleted: new Set(s.units.filter((u) => !keep.has(u.id)).map((u) => u.id)),
      },
    ];
  }

  /** memgate's own policy on its own agent: reclaim to the budget (spill, two-key), read hot and hot + cold. */
  async function memgateViews(s: QuestionSetup, budget: number): Promise<View[]> {
    const agentId = auditAgentId(s.task.runId, s.q.question_id, budget);
    const hot = await ingest(agentId, s.turns);
    const now = parseLongMemEvalDate(s.q.question_date);
    const byId = new Map(hot.map((e) => [e._id, e]));
    const plan = planReclaimToBudget(hot, budget, now, reclaimPolicy(config));
    // The nightly reclaim's own moves: ledger first, tombstones before deletion, batch spills.
    const run = { agentId, asOf: now, runId: `audit:${s.task.runId}:${budget}` };
    const spills = plan
      .filter((step) => step.action === 'spill')
      .map((step) => ({ step, entry: byId.get(step.id)! }));
    for (let i = 0; i < spills.length; i += config.nightlyBatch) {
      await spillEntries(store, run, spills.slice(i, i + config.nightlyBatch));
    }
    const evictions = plan.filter((step) => step.action === 'evict');
    for (const step of evictions) await evictEntry(store, run, byId.get(step.id)!, step);
    const [hotAfter, cold] = await Promise.all([
      agentEntries(store, agentId, 'hot'),
      agentEntries(store, agentId, 'cold'),
    ]);
    const hotUnits = hotAfter.map(unitOf);
    const hotIds = new Set(hotUnits.map((u) => u.id));
    // Read from the store, not the plan: an eviction may withdraw (its stand-in went), and a
    // retried attempt's plan holds none of what an earlier attempt already deleted.
    const kept = new Set([...hotAfter, ...cold].map((e) => unitOf(e).id));
    const deleted = new Set(s.units.filter((u) => !kept.has(u.id)).map((u) => u.id));
    return [
      { readSetting: 'hot', reachable: chronological(hotUnits), deleted },
      {
        readSetting: 'hot+cold',
        reachable: chronological([...hotUnits, ...cold.map(unitOf).filter((u) => !hotIds.has(u.id))]),
        deleted,
      },
    ];
  }

  async function views(
    s: QuestionSetup,
    arm: AuditArm,
    budget: number | null,
    importance: () => Promise<Map<string, number>>,
  ) {
    if (arm === 'no-eviction' || budget === null) return retained(s, new Set(s.units.map((u) => u.id)));
    const qid = s.q.question_id;
    switch (arm) {
      case 'fifo':
        return retained(s, retainFifo(s.units, budget));
      case 'random-1':
      case 'random-2':
      case 'random-3':
        return retained(s, retainRandom(s.units, budget, `${arm}:${qid}`));
      case 'redundancy':
        return retained(s, retainRedundancyAware(s.units, budget));
      case 'importance':
        return retained(s, retainByImportance(s.units, await importance(), budget));
      case 'gold-control':
        return retained(s, retainGoldControl(s.units, s.goldIds, budget, `gold-control:${qid}`));
      case 'memgate':
        return memgateViews(s, budget);
    }
  }

  async function evaluate(
    s: QuestionSetup,
    task: AuditArmTask,
    budget: number | null,
    view: View,
    condition: ReadCondition,
  ): Promise<AuditRecord> {
    const reachableIds = new Set(view.reachable.map((u) => u.id));
    const context = readContext(condition, s.q.question, view.reachable, s.goldIds, s.semantic);
    const cap = task.settings.restoreCapTokens;
    const policyRead = await ask(s, context);
    const restore = withRestored(context, s.gold, cap);
    const restoredRead = await ask(s, restore.units);
    const goldEvicted = s.gold.filter((g) => !reachableIds.has(g.id)).length;
    const goldDeleted = s.gold.filter((g) => view.deleted.has(g.id)).length;
    const c = classify({
      cleanGold: task.cleanGold,
      policy: policyRead.correct,
      restored: restoredRead.correct,
      goldDeleted,
    });
    let checks: TightnessChecks | null = null;
    if (c.bin === 'irreversible' || c.bin === 'recoverable' || c.bin === 'residual') {
      const inContext = new Set(context.map((u) => u.id));
      // Surviving: kept by the arm, in this read setting's reach or not.
      const surviving = withRestored(
        context,
        s.gold.filter((g) => !view.deleted.has(g.id)),
        cap,
      );
      checks = {
        survivingGoldOnly: (await ask(s, surviving.units)).correct,
        wholeStore: (await ask(s, view.reachable)).correct,
        placebo: (
          await ask(s, [
            ...context,
            ...placeboFor(
              restore.added,
              s.filler.filter((u) => !inContext.has(u.id)),
            ),
          ])
        ).correct,
      };
    }
    const budgetKey = budget ?? 'none';
    return {
      _id: `${task.runId}:${s.q.question_id}:${task.arm}:${budgetKey}:${view.readSetting}:${condition}`,
      runId: task.runId,
      questionId: s.q.question_id,
      questionType: s.q.question_type,
      ...armPolicy(task.arm),
      arm: task.arm,
      budget,
      readSetting: view.readSetting,
      condition,
      ranker: task.settings.ranker,
      reader: s.reader.name,
      judge: s.judge.name,
      ...(task.arm === 'importance' ? { importanceScorer: models.importance.name } : {}),
      store: {
        units: s.units.length,
        tokens: totalTokens(s.units),
        reachableUnits: view.reachable.length,
        reachableTokens: totalTokens(view.reachable),
      },
      gold: {
        units: s.gold.length,
        evicted: goldEvicted,
        deleted: goldDeleted,
      },
      contextUnits: context.length,
      restoredTokens: totalTokens(restore.added),
      verdicts: {
        ...c,
        cleanGold: task.cleanGold,
        policy: policyRead.correct,
        restored: restoredRead.correct,
        checks,
      },
      answers: { policy: policyRead.answer, restored: restoredRead.answer },
      at: Date.now(),
    };
  }

  function budgetsOf(task: AuditArmTask): (number | null)[] {
    return task.arm === 'no-eviction' ? [null] : task.settings.budgets;
  }

  function recordIds(task: AuditArmTask): string[] {
    const settings: ReadSetting[] = task.arm === 'memgate' ? ['hot', 'hot+cold'] : ['retained'];
    return budgetsOf(task).flatMap((b) =>
      settings.flatMap((rs) =>
        READ_CONDITIONS.map(
          (c) => `${task.runId}:${task.ref.questionId}:${task.arm}:${b ?? 'none'}:${rs}:${c}`,
        ),
      ),
    );
  }

  return {
    async listAuditQuestions(input: {
      source: string;
      questionIds?: string[];
      limit?: number;
    }): Promise<QuestionRef[]> {
      input = parseInput(auditListSchema, input, 'audit question listing');
      let refs = listQuestions(input.source);
      if (input.questionIds?.length) {
        const wanted = new Set(input.questionIds);
        const missing = input.questionIds.filter((id) => !refs.some((r) => r.questionId === id));
        if (missing.length)
          throw new InvalidInputError(`no such question in ${input.source}: ${missing.join(', ')}`);
        refs = refs.filter((r) => wanted.has(r.questionId));
      }
      return input.limit ? refs.slice(0, input.limit) : refs;
    },

    /** Ingest the haystack in date order into the question's agent, and run the denominator filter. */
    async prepareAuditQuestion(task: AuditQuestionTask): Promise<PreparedQuestion> {
      task = parseInput(auditQuestionTaskSchema, task, 'audit question');
      const s = await setup(task, () => heartbeat());
      return {
        units: s.units.length,
        tokens: totalTokens(s.units),
        goldUnits: s.gold.length,
        cleanGold: (await ask(s, s.gold)).correct,
      };
    },

    /**
     * One question under one arm: every budget, read setting and condition. Records are saved
     * per budget and the heartbeat carries the next budget, so a retry resumes there.
     */
    async runAuditArm(task: AuditArmTask): Promise<ArmOutcome> {
      task = parseInput(auditArmTaskSchema, task, 'audit arm');
      const ids = recordIds(task);
      if ((await storedAuditRecordIds(store, ids)).size === ids.length)
        return { records: ids.length, reused: true };
      // A heartbeat while embedding keeps the budget this attempt resumes at.
      const s = await setup(task, () => heartbeat(activityInfo().heartbeatDetails));
      let scores: Map<string, number> | undefined;
      const importance = async () => {
        if (!scores) {
          const values = await models.importance.score(
            s.units.map((u) => ({ id: u.id, text: u.text, role: u.role })),
          );
          scores = new Map(s.units.map((u, i) => [u.id, values[i]!]));
        }
        return scores;
      };
      const budgets = budgetsOf(task);
      const resumeAt = (activityInfo().heartbeatDetails as number | undefined) ?? 0;
      for (let i = resumeAt; i < budgets.length; i++) {
        const records: AuditRecord[] = [];
        for (const view of await views(s, task.arm, budgets[i]!, importance)) {
          for (const condition of READ_CONDITIONS) {
            records.push(await evaluate(s, task, budgets[i]!, view, condition));
            heartbeat(i);
            // A worker shutting down cancels the attempt; the retry resumes at this budget.
            Context.current().cancellationSignal.throwIfAborted();
          }
        }
        await saveAuditRecords(store, records);
        heartbeat(i + 1);
      }
      return { records: ids.length, reused: false };
    },

    /** Drop the question's agents (haystack, memgate's copies); the records stay. */
    async releaseAuditQuestion(task: AuditQuestionTask): Promise<void> {
      task = parseInput(auditQuestionTaskSchema, task, 'audit question');
      const id = task.ref.questionId;
      haystacks.delete(auditAgentId(task.runId, id));
      await dropAgents(store, [
        auditAgentId(task.runId, id),
        ...task.settings.budgets.map((b) => auditAgentId(task.runId, id, b)),
      ]);
    },
  };
}
