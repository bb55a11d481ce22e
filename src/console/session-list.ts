/**
 * The caller's sessions, newest first (GET /v1/sessions), refreshed by the
 * app every few seconds and after anything that changes one. Each item says
 * its status, whether a prompt waits, its model and folder; the open one is
 * marked (`aria-current`).
 */
import type { GatewayClient, SessionInfo } from '../client/index.js'
import { duration, h, replaceChildren, shortId } from './dom.js'

const PAGE = 20

export class SessionList {
  readonly element: HTMLElement
  readonly #list = h('ul', { class: 'list', testid: 'session-list', attrs: { 'aria-label': 'Sessions' } })
  readonly #more = h('button', { class: 'link', testid: 'session-list-more', attrs: { type: 'button', hidden: true } }, 'Show older sessions')
  #sessions: SessionInfo[] = []
  #cursor: string | null = null
  #selected: string | null = null
  #live: { id: string, state: string } | null = null
  /** Counts the list requests made: an answer to one older than the last refresh is stale. */
  #asked = 0

  constructor (private readonly client: GatewayClient, private readonly onOpen: (session: SessionInfo) => void) {
    this.#more.addEventListener('click', () => { void this.#loadMore() })
    this.element = h('section', { class: 'panel', attrs: { 'aria-labelledby': 'sessions-title' } },
      h('h2', { attrs: { id: 'sessions-title' } }, 'Sessions'), this.#list, this.#more)
  }

  /** The sessions shown (after the last refresh). */
  get sessions (): readonly SessionInfo[] {
    return this.#sessions
  }

  select (id: string | null): void {
    this.#selected = id
    this.#live = null
    this.#render()
  }

  /** The open session's state as its connection knows it, newer than the last poll. */
  live (id: string, state: string): void {
    this.#live = { id, state }
    this.#render()
  }

  /** Reloads as many sessions as are shown (at least one page). Rejects on an API error (the app decides: 401 signs out). */
  async refresh (): Promise<void> {
    // A poll and a refresh after a change can be out at once, and answered in either order.
    const asked = ++this.#asked
    const page = await this.client.listSessions({ limit: Math.min(100, Math.max(PAGE, this.#sessions.length)) })
    if (asked !== this.#asked) return
    this.#sessions = page.sessions
    this.#cursor = page.next_cursor
    this.#render()
  }

  async #loadMore (): Promise<void> {
    if (this.#cursor === null) return
    const asked = this.#asked
    const page = await this.client.listSessions({ limit: PAGE, cursor: this.#cursor })
    // A refresh made meanwhile holds a newer list, and its own cursor.
    if (asked !== this.#asked) return
    const known = new Set(this.#sessions.map((s) => s.id))
    this.#sessions = [...this.#sessions, ...page.sessions.filter((s) => !known.has(s.id))]
    this.#cursor = page.next_cursor
    this.#render()
  }

  #render (): void {
    this.#more.hidden = this.#cursor === null
    if (this.#sessions.length === 0) {
      replaceChildren(this.#list, h('li', { class: 'empty muted' }, 'No sessions yet.'))
      return
    }
    const now = Date.now()
    replaceChildren(this.#list, ...this.#sessions.map((s) => {
      const model = typeof s.options.model === 'string' ? s.options.model : 'default model'
      const cwd = typeof s.options.cwd === 'string' ? s.options.cwd : null
      // The CLI process may run between turns: then the session is idle.
      const polled = s.pending_requests > 0 ? 'requires_action' : s.turn_running ? 'running' : s.status === 'running' ? 'idle' : s.status
      const state = this.#live?.id === s.id ? this.#live.state : polled
      const label = state === 'requires_action' ? 'waiting for you' : state
      return h('li', {},
        h('button', {
          class: 'item',
          testid: 'session-item',
          attrs: { type: 'button', 'data-session-id': s.id, 'data-status': s.status, 'aria-current': s.id === this.#selected ? 'true' : null },
          on: { click: () => { this.onOpen(s) } }
        },
        h('span', { class: 'item-top' }, h('span', { class: 'mono' }, shortId(s.id)), h('span', { class: `dot dot-${state}`, attrs: { 'aria-hidden': 'true' } }), h('span', { class: 'item-state' }, label)),
        h('span', { class: 'item-sub muted' }, `${model}${cwd === null ? '' : ` · ${cwd}`} · ${duration(now - Date.parse(s.created_at))} ago`)))
    }))
  }
}
