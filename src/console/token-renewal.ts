/**
 * Renewing the sign-in before the gateway ends the console's connections
 * (JWT_EXPIRY_ENDS_CONNECTIONS). The typed client asks for a newer token a
 * little before a connection's deadline (its `refreshToken` option); a page
 * cannot mint one, so it asks the person: a banner over the page with a
 * token field. A token given is checked with one API call before it is
 * taken (a typo must not become the credential of every REST call), then
 * kept for the tab and handed to the client, which presents it on every
 * open connection and uses it for REST from then on. A JWT's own `exp` is
 * watched too: REST calls are refused after it whatever the setting, so the
 * question comes before it even with no connection open. Ignored, the
 * banner stays until the end, as without it.
 */
import { GatewayClient, GatewayRequestError } from '../client/index.js'
import { MAX_TIMER_MS, refreshDelay } from '../client/refresh-delay.js'
import { h, replaceChildren } from './dom.js'

export interface TokenRenewalOptions {
  /** The token in use (its JWT `exp` says when it ends). */
  current: () => string | null
  /** Keeps an accepted token for the tab. */
  keep: (token: string) => void
}

export class TokenRenewal {
  readonly #o: TokenRenewalOptions
  #banner: HTMLElement | null = null
  #answer: ((token: string) => void) | null = null
  #asked: Promise<string> | null = null
  #timer: ReturnType<typeof setTimeout> | null = null
  #watched: GatewayClient | null = null

  constructor (options: TokenRenewalOptions) {
    this.#o = options
  }

  /** Resolves with a newer token the gateway accepts, once the person gives one (one banner for every caller). */
  ask (): Promise<string> {
    this.#asked ??= new Promise<string>((resolve) => {
      this.#answer = resolve
      this.#show()
    })
    return this.#asked
  }

  /**
   * Asks, through `client` (its refreshedToken, shared with its connections),
   * ahead of the expiry of the JWT it uses, and again for each newer one.
   * One client is watched at a time: a newer sign-in's replaces the last.
   */
  watch (client: GatewayClient): void {
    this.#stopWatching()
    this.#watched = client
    const token = client.token ?? null
    const ends = expiryOf(token)?.getTime()
    if (ends === undefined) return
    const delay = refreshDelay(ends, Date.now())
    this.#timer = setTimeout(() => {
      this.#timer = null
      // Renewed meanwhile (a connection's deadline came first), or woken weeks early (a JWT beyond one
      // timer's reach, MAX_TIMER_MS, which would otherwise be asked about at once): watch again.
      if (client.token !== token || delay === MAX_TIMER_MS) { this.watch(client); return }
      void client.refreshedToken().then((renewed) => {
        // Null: this client cannot renew (watching again would ask again at once, in a loop).
        if (renewed !== null && this.#watched === client) this.watch(client)
      }, () => {})
    }, delay)
  }

  #stopWatching (): void {
    if (this.#timer !== null) clearTimeout(this.#timer)
    this.#timer = null
    this.#watched = null
  }

  /** Takes the banner away, unanswered, and stops watching (signed out, or signed in again with another token). */
  close (): void {
    this.#stopWatching()
    this.#hide()
  }

  #hide (): void {
    this.#banner?.remove()
    this.#banner = null
    this.#answer = null
    this.#asked = null
  }

  #show (): void {
    const input = h('input', { testid: 'renew-token', attrs: { type: 'password', autocomplete: 'off', spellcheck: 'false', 'aria-label': 'Newer token' } })
    const error = h('div', { class: 'hint', testid: 'renew-error', attrs: { hidden: true } })
    const submit = h('button', { testid: 'renew-submit', attrs: { type: 'submit' } }, 'Renew')
    const ends = expiryOf(this.#o.current())
    const form = h('form', { class: 'grow' },
      h('strong', {}, ends === null ? 'Your sign-in is about to end.' : `Your sign-in ends at ${ends.toLocaleTimeString()}.`),
      ' Paste a newer token to stay connected; without one, live connections close then.',
      h('div', { class: 'renew-row' }, input, submit),
      error)
    form.addEventListener('submit', (event) => {
      event.preventDefault()
      const token = input.value.trim()
      if (token === '') return
      submit.disabled = true
      void this.#check(token).then((problem) => {
        submit.disabled = false
        if (problem === null) return this.#accept(token)
        replaceChildren(error, problem)
        error.hidden = false
        input.focus()
      })
    })
    this.#banner?.remove()
    this.#banner = h('div', { class: 'banner banner-warn renew-banner', testid: 'renew-banner', attrs: { role: 'alert' } }, form)
    document.body.prepend(this.#banner)
    input.focus()
  }

  /** Null when the gateway accepts `token`, else what to tell the person. */
  async #check (token: string): Promise<string | null> {
    try {
      await new GatewayClient({ url: location.origin, token }).listSessions({ limit: 1 })
      return null
    } catch (err) {
      return err instanceof GatewayRequestError && err.statusCode === 401
        ? 'The gateway refused this token.'
        : `Could not check it: ${err instanceof Error ? err.message : String(err)}`
    }
  }

  #accept (token: string): void {
    const answer = this.#answer
    this.#o.keep(token)
    // Still watching: a renewal a connection asked for is followed by the timer of the old JWT (it sees the newer one).
    this.#hide()
    answer?.(token)
  }
}

/** When a JWT ends (its `exp`), or null for anything else. Not verified: only shown. */
function expiryOf (token: string | null): Date | null {
  const payload = token?.split('.')[1]
  if (payload === undefined) return null
  try {
    const exp = (JSON.parse(atob(payload.replace(/-/g, '+').replace(/_/g, '/'))) as { exp?: unknown }).exp
    return typeof exp === 'number' ? new Date(exp * 1000) : null
  } catch {
    return null
  }
}
