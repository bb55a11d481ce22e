/**
 * Sign-in: the token (a GATEWAY_TOKENS token or a JWT) is checked with one
 * API call and kept in sessionStorage, so it lives as long as the tab: never
 * written to disk by the page, never in a URL or a cookie, handed to other
 * tabs only while one is open (token-share.ts). A link `/#token=…` signs in
 * too (takeTokenFromAddress). The WebSocket gets it as a `bearer.<token>`
 * subprotocol entry (the client's `auth: 'subprotocol'`), REST calls as
 * `Authorization: Bearer`.
 */
import { GatewayClient, GatewayRequestError } from '../client/index.js'
import { h } from './dom.js'

const KEY = 'claude-gateway.token'

/** The token of this tab, if signed in. */
export function storedToken (): string | null {
  try {
    return sessionStorage.getItem(KEY)
  } catch {
    return null // storage disabled: sign in every time
  }
}

export function forgetToken (): void {
  try {
    sessionStorage.removeItem(KEY)
  } catch { /* nothing kept */ }
}

/** Keeps `token` for this tab. */
export function keepToken (token: string): void {
  try {
    sessionStorage.setItem(KEY, token)
  } catch { /* kept for this page only */ }
}

/** A client for this page's own gateway; `refreshToken` is asked for a newer token before a connection's deadline. */
export function clientFor (token: string, refreshToken?: () => Promise<string>): GatewayClient {
  return new GatewayClient({ url: location.origin, token, ...(refreshToken === undefined ? {} : { refreshToken }) })
}

/** Checks `token` with one API call; once accepted, keeps it for this tab and resolves with its client. */
export async function signInWith (token: string, refreshToken?: () => Promise<string>): Promise<GatewayClient> {
  const client = clientFor(token, refreshToken)
  await client.listSessions({ limit: 1 })
  keepToken(token)
  return client
}

/** What to tell someone whose sign-in failed. */
export function signInError (err: unknown): string {
  return err instanceof GatewayRequestError && err.statusCode === 401
    ? 'The gateway refused this token.'
    : `Could not sign in: ${err instanceof Error ? err.message : String(err)}`
}

/**
 * A token handed over in the address (`/#token=…`, what `npm run demo`
 * prints): taken out of the address at once, so it stays in neither the
 * history nor a bookmark. A fragment never reaches the server or its logs.
 */
export function takeTokenFromAddress (): string | null {
  const match = /^#token=([^&]+)$/.exec(location.hash)
  if (match?.[1] === undefined) return null
  history.replaceState(null, '', location.pathname + location.search)
  try {
    return decodeURIComponent(match[1])
  } catch {
    return null
  }
}

/** The sign-in form; `onSignedIn` gets a client whose token the gateway accepted. */
export function signInView (onSignedIn: (client: GatewayClient) => void, notice: string | null, refreshToken?: () => Promise<string>): HTMLElement {
  const token = h('input', { testid: 'signin-token', attrs: { id: 'signin-token', type: 'password', autocomplete: 'current-password', required: true, spellcheck: 'false' } })
  const submit = h('button', { class: 'primary', testid: 'signin-submit', attrs: { type: 'submit' } }, 'Sign in')
  const error = h('p', { class: 'form-error', testid: 'signin-error', attrs: { role: 'alert', hidden: notice === null } }, notice ?? '')
  const form = h('form', { class: 'signin card', attrs: { 'aria-labelledby': 'signin-title' } },
    h('h1', { attrs: { id: 'signin-title' } }, 'Claude Gateway'),
    h('p', { class: 'muted' }, 'Sign in with a gateway token (from GATEWAY_TOKENS, a JWT, or the token the gateway printed at start). It is kept only while a console tab is open, never on disk.'),
    // For password managers (and Chrome's form check): the token is the "password" of this gateway.
    h('input', { attrs: { type: 'text', name: 'username', autocomplete: 'username', value: location.host, hidden: true, 'aria-hidden': 'true', tabindex: -1 } }),
    h('label', { attrs: { for: 'signin-token' } }, 'Token'),
    token, error, submit)
  form.addEventListener('submit', (e) => {
    e.preventDefault()
    const value = token.value.trim()
    if (value === '') return
    submit.disabled = true
    error.hidden = true
    signInWith(value, refreshToken).then(onSignedIn, (err: unknown) => {
      error.textContent = signInError(err)
      error.hidden = false
      submit.disabled = false
      token.focus()
    })
  })
  queueMicrotask(() => { token.focus() })
  return form
}
