import { AsyncLocalStorage } from 'node:async_hooks';

/**
 * Whose work a store command is: the store's admission lets tenants take turns
 * (core/admission.ts), so one tenant's flood of commands delays another's next command by one
 * of its own, not by the whole flood. A recall runs on behalf of its agent (`agent:<id>`), an
 * activity on behalf of the workflow that called it (`workflow:<id>`: each agent's work runs
 * in workflows of its own); anything else shares one turn.
 */
const tenancy = new AsyncLocalStorage<string>();

/** `work`, with every store command it sends (however deep in its calls) queued as `tenant`'s. */
export function onBehalfOf<T>(tenant: string, work: () => T): T {
  return tenancy.run(tenant, work);
}

/** The tenant of the current store command, or '' for work on no one's behalf. */
export function currentTenant(): string {
  return tenancy.getStore() ?? '';
}
