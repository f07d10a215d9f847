import { Client, Connection, WithStartWorkflowOperation } from '@temporalio/client';
import type { Config } from '../core/config';
import { memoryPolicy, parseWriteRequest, type MemoryPolicy, type WriteRequestInput } from '../core/entry';
import { parseRecallRequest, type RecallRequestInput } from '../core/recall';
import { openStore, type Store } from '../store/db';
import { recall, type RecallResult } from '../store/recall';
import { agentMemory, agentMemoryWorkflowId, writeUpdate, type WriteResult } from '../workflows/agentMemory';
import { fromTemporalFailure } from './errors';

export interface ClientEndpoints {
  temporalAddress: string;
  mongoUri: string;
}

/**
 * The typed client for agents. Writes go through the agent's durable workflow; recall is a
 * direct read. Every call validates its input first and throws a MemgateError subclass.
 */
export class MemgateClient {
  private constructor(
    readonly temporal: Client,
    readonly store: Store,
    private readonly config: Config,
    private readonly policy: MemoryPolicy,
  ) {}

  static async connect(config: Config, endpoints: ClientEndpoints): Promise<MemgateClient> {
    const connection = await Connection.connect({ address: endpoints.temporalAddress });
    const temporal = new Client({ connection, namespace: config.temporalNamespace });
    const store = await openStore(endpoints.mongoUri, config.database);
    return new MemgateClient(temporal, store, config, memoryPolicy(config));
  }

  /** Durable soft write of one or more entries; resolves once they are in MongoDB. */
  async write(request: WriteRequestInput): Promise<WriteResult> {
    const limits = {
      maxTextChars: this.config.maxTextChars,
      maxEntriesPerWrite: this.config.maxEntriesPerWrite,
    };
    const { agentId } = parseWriteRequest(request, limits);
    const startWorkflowOperation = new WithStartWorkflowOperation(agentMemory, {
      workflowId: agentMemoryWorkflowId(agentId),
      taskQueue: this.config.taskQueue,
      workflowIdConflictPolicy: 'USE_EXISTING',
      args: [{ agentId, limits }],
    });
    try {
      return await this.temporal.workflow.executeUpdateWithStart(writeUpdate, {
        args: [request],
        startWorkflowOperation,
      });
    } catch (err) {
      throw fromTemporalFailure(err);
    }
  }

  async recall(request: RecallRequestInput): Promise<RecallResult> {
    return recall(this.store, parseRecallRequest(request), this.policy);
  }

  async close(): Promise<void> {
    await this.temporal.connection.close();
    await this.store.close();
  }
}
