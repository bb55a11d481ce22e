/**
 * The signed-in console: a sidebar (new session, what needs attention, the
 * session list) and the open session. The open session is in the URL
 * (`#/session/<id>`), so a reload or a shared link opens it again. Lists are
 * polled while the tab is visible; a 401 anywhere signs out (the token was
 * revoked or a JWT expired).
 */
import { type GatewayClient, GatewayRequestError, type Role, type SessionInfo } from '../client/index.js'
import { h, replaceChildren } from './dom.js'
import { AttentionList } from './attention-list.js'
import { newSessionForm } from './new-session-form.js'
import { SessionList } from './session-list.js'
import { SessionView } from './session-view.js'

const SESSIONS_EVERY_MS = 5000
const ATTENTION_EVERY_MS = 3000

export class ConsoleApp {
  readonly element: HTMLElement
  readonly #client: GatewayClient
  readonly #sessions: SessionList
  readonly #attention: AttentionList
  readonly #main = h('main', { class: 'main', attrs: { id: 'main' } })
  readonly #newForm: HTMLElement
  readonly #newButton = h('button', { class: 'primary wide', testid: 'new-session', attrs: { type: 'button', 'aria-expanded': 'false' } }, 'New session')
  readonly #timers: Array<ReturnType<typeof setInterval>> = []
  #view: SessionView | null = null
  #soonTimer: ReturnType<typeof setTimeout> | null = null
  /** Counts opens, so a slow fetch of a session chosen earlier does not replace a later choice. */
  #opening = 0
  #closed = false

  constructor (client: GatewayClient, private readonly onSignOut: (notice: string | null) => void) {
    this.#client = client
    // Fetched again, not the polled info: its holder may be seconds (a hidden tab: minutes) old, and attaching
    // as controller to a session someone took meanwhile would take it from them silently.
    this.#sessions = new SessionList(client, (s) => { this.open(s.id) })
    this.#attention = new AttentionList(client, (id) => { this.open(id) })
    this.#newForm = newSessionForm(client, (s) => {
      this.#toggleForm(false)
      void this.#poll(this.#sessions)
      this.open(s.id, s)
    })
    this.#newForm.hidden = true
    this.#newButton.addEventListener('click', () => { this.#toggleForm(this.#newForm.hidden === true) })
    this.element = h('div', { class: 'app' },
      h('header', { class: 'topbar' },
        h('h1', { class: 'brand' }, 'Claude Gateway'),
        h('span', { class: 'spacer' }),
        h('button', { class: 'link', testid: 'signout', attrs: { type: 'button' }, on: { click: () => { this.close(); onSignOut(null) } } }, 'Sign out')),
      h('nav', { class: 'sidebar', attrs: { 'aria-label': 'Sessions and prompts' } }, this.#newButton, this.#newForm, this.#attention.element, this.#sessions.element),
      this.#main)
    this.#showEmpty()
    window.addEventListener('hashchange', this.#onHash)
    void this.#poll(this.#sessions)
    void this.#poll(this.#attention)
    this.#timers.push(setInterval(() => { void this.#poll(this.#sessions) }, SESSIONS_EVERY_MS))
    this.#timers.push(setInterval(() => { void this.#poll(this.#attention) }, ATTENTION_EVERY_MS))
    this.#onHash()
  }

  /** Opens a session (its info is fetched when not given), as `role` or, by default, as holder if nobody holds it. */
  open (id: string, info?: SessionInfo, role?: Role): void {
    // A history entry per session opened: Back returns to the previous one (hashchange).
    if (hashRoute()?.id !== id) history.pushState(null, '', `#/session/${id}`)
    // The session shown is left as it is, unless its connection ended for good (choosing it again attaches again)
    // or another role is asked for (`?role=` changed in the address: watch instead of hold, or the reverse).
    if (this.#view !== null && !this.#view.closed && (role === undefined || role === this.#view.role) &&
      this.#main.querySelector(`[data-session-id="${CSS.escape(id)}"]`) !== null) return
    this.#view?.close()
    this.#view = null
    this.#sessions.select(id)
    const opening = ++this.#opening
    const show = (session: SessionInfo): void => {
      if (this.#closed || opening !== this.#opening) return // another session was chosen meanwhile
      this.#view?.close()
      this.#view = new SessionView({
        client: this.#client,
        info: session,
        role,
        onChanged: () => { this.#soon() },
        onState: (state) => { this.#sessions.live(session.id, state) }
      })
      replaceChildren(this.#main, this.#view.element)
      this.#view.focus()
    }
    if (info !== undefined) return show(info)
    replaceChildren(this.#main, h('p', { class: 'muted center' }, 'Loading…'))
    this.#client.getSession(id).then(show, (err: unknown) => {
      if (this.#signedOutBy(err) || opening !== this.#opening) return
      replaceChildren(this.#main, h('div', { class: 'banner banner-error', testid: 'error-banner', attrs: { role: 'alert' } },
        err instanceof GatewayRequestError && err.code === 'session_not_found' ? 'No such session (or not yours).' : `Could not open the session: ${(err as Error).message}`))
    })
  }

  close (): void {
    this.#closed = true
    for (const timer of this.#timers) clearInterval(timer)
    if (this.#soonTimer !== null) clearTimeout(this.#soonTimer)
    window.removeEventListener('hashchange', this.#onHash)
    this.#view?.close()
    this.#view = null
  }

  readonly #onHash = (): void => {
    const route = hashRoute()
    if (route !== null) {
      this.open(route.id, undefined, route.role)
    } else if (this.#view !== null) { // Back past the first session opened
      this.#view.close()
      this.#view = null
      this.#opening++
      this.#sessions.select(null)
      this.#showEmpty()
    }
  }

  #showEmpty (): void {
    replaceChildren(this.#main, h('div', { class: 'center muted empty-main' },
      h('p', {}, 'Pick a session on the left, or create one.')))
  }

  #toggleForm (show: boolean): void {
    this.#newForm.hidden = !show
    this.#newButton.setAttribute('aria-expanded', String(show))
    if (show) this.#newForm.querySelector('input')?.focus()
  }

  /** Both lists refreshed shortly (a burst of changes, as in a replay, makes one refresh). */
  #soon (): void {
    if (this.#soonTimer !== null) return
    this.#soonTimer = setTimeout(() => {
      this.#soonTimer = null
      void this.#poll(this.#sessions)
      void this.#poll(this.#attention)
    }, 300)
  }

  /** One refresh; skipped while the tab is hidden (the next tick catches up). */
  async #poll (what: { refresh: () => Promise<void> }): Promise<void> {
    if (this.#closed || document.visibilityState === 'hidden') return
    try {
      await what.refresh()
    } catch (err) {
      this.#signedOutBy(err)
    }
  }

  /** A 401 means the token is no longer good: back to sign-in, saying why. */
  #signedOutBy (err: unknown): boolean {
    if (!(err instanceof GatewayRequestError) || err.statusCode !== 401 || this.#closed) return false
    this.close()
    this.onSignOut('The gateway no longer accepts your token. Sign in again.')
    return true
  }
}

/** `#/session/<id>` and, to choose the role, `#/session/<id>?role=observer` (or `controller`). */
function hashRoute (): { id: string, role?: Role } | null {
  const match = /^#\/session\/([0-9a-f-]{36})(?:\?role=(observer|controller))?$/i.exec(location.hash)
  if (match?.[1] === undefined) return null
  return { id: match[1].toLowerCase(), ...(match[2] === undefined ? {} : { role: match[2].toLowerCase() as Role }) }
}
