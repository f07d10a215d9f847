import { html, render } from 'htm/preact';
import { Component, type ComponentChildren } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { ApiError, session } from './api';
import { AgentPage } from './agent';
import { AgentsPage } from './agents';
import { AuditPage } from './audit';
import { Failure, asApiError, useRoute } from './common';
import { EntryPage } from './entry';
import { EntriesPage } from './entries';
import { NightsPage } from './nights';
import { SearchPage } from './search';
import './style.css';

/**
 * The memory browser (docs/browser.md): one page, its views chosen after `#`. Until a key is
 * entered it asks for one, and every view reads through the HTTP API with that key.
 */

/** The key form; after a refused key, why it was refused. */
function SignIn({ refusal }: { refusal: string | undefined }) {
  const [key, setKey] = useState('');
  const submit = (event: Event) => {
    event.preventDefault();
    if (key.trim()) session.signIn(key.trim());
  };
  return html`<form class="sign-in" onSubmit=${submit}>
    ${refusal !== undefined && html`<${Failure} error=${new ApiError(401, 'Unauthenticated', refusal)} />`}
    <h2>Enter an API key</h2>
    <p>
      A key from <code>memgate keys create</code>. It is kept in this tab only (its session storage) and sent
      with every call; the page shows only what the key covers.
    </p>
    <input
      type="password"
      name="key"
      autocomplete="off"
      placeholder="mg_…"
      aria-label="API key"
      value=${key}
      onInput=${(e: Event) => setKey((e.target as HTMLInputElement).value)}
    />
    <button type="submit">Open</button>
  </form>`;
}

/** A view that throws is shown as its failure, never as a blank page. */
class Boundary extends Component<{ children: ComponentChildren }, { error?: unknown }> {
  override state: { error?: unknown } = {};
  override componentDidCatch(error: unknown) {
    this.setState({ error });
  }
  override render() {
    return this.state.error === undefined
      ? this.props.children
      : html`<${Failure} error=${asApiError(this.state.error)} />`;
  }
}

function View({ path, params }: { path: string[]; params: URLSearchParams }) {
  const [first, agentId, section, entryId] = path;
  if (first === 'audit') return html`<${AuditPage} />`;
  if (first !== 'agents' || agentId === undefined) return html`<${AgentsPage} />`;
  if (section === 'search') return html`<${SearchPage} agentId=${agentId} query=${params.get('q') ?? ''} />`;
  if (section === 'entries' && entryId !== undefined)
    return html`<${EntryPage} agentId=${agentId} entryId=${entryId} />`;
  if (section === 'entries')
    return html`<${EntriesPage} agentId=${agentId} cursor=${params.get('cursor')} />`;
  if (section === 'nights') return html`<${NightsPage} agentId=${agentId} />`;
  return html`<${AgentPage} agentId=${agentId} />`;
}

function App() {
  const route = useRoute();
  // Rendered again at each sign-in and sign-out, keeping why a key was refused.
  const [{ refusal }, setSigned] = useState<{ refusal?: string | undefined; round: number }>({ round: 0 });
  useEffect(() => session.listen((why) => setSigned((s) => ({ refusal: why, round: s.round + 1 }))), []);
  return html`<header>
      <a href="#/" class="brand">memgate</a>
      <nav>
        <a href="#/">Agents</a>
        <a href="#/audit">Audit</a>
        ${session.key() && html`<button type="button" class="link" onClick=${() => session.signOut()}>Sign out</button>`}
      </nav>
    </header>
    <main>
      ${
        session.key() === null
          ? html`<${SignIn} refusal=${refusal} />`
          : html`<${Boundary} key=${route.path.join('/')}><${View} ...${route} /></${Boundary}>`
      }
    </main>`;
}

render(html`<${App} />`, document.getElementById('app')!);
