/**
 * The gateway's web console: sign in with a token, list and create sessions,
 * follow a session's transcript live, answer its permission prompts,
 * interrupt, switch model, take over from another client, and see why
 * something is wrong. Plain TypeScript and DOM on the typed client of
 * src/client; built by scripts/build-console.mjs and served at `/`
 * (docs/CONSOLE.md).
 *
 * Stable `data-testid`s for browser tests (docs/CONSOLE.md lists them too):
 *   sign-in:      signin-token, signin-submit, signin-error, signout;
 *                 renew-banner, renew-token, renew-submit, renew-error (a newer token before the JWT ends)
 *   sidebar:      new-session (opens the form), new-session-form, new-session-model,
 *                 new-session-mode, new-session-cwd, new-session-partial,
 *                 new-session-submit, new-session-error;
 *                 attention-list, attention-item (data-session-id, data-request-id), attention-count;
 *                 session-list, session-item (data-session-id, data-status), session-list-more
 *   session:      session-state (data-state: running | requires_action | idle | starting |
 *                 stopping | stopped | exited), connection-state (data-state: connecting |
 *                 open | reconnecting | closed), role (data-role: holder | observer | none),
 *                 take-over, model-select, interrupt, stop-session, session-folder
 *   banners:      store-banner (data-state), problem-banner (data-code), problem-retries,
 *                 error-banner (data-code)
 *   transcript:   transcript, msg-user, msg-assistant (class `streaming` while partial),
 *                 msg-thinking, msg-tool (data-tool-use-id), msg-tool-result (inside its
 *                 msg-tool), msg-result, msg-system, msg-status, msg-permission,
 *                 msg-permission-resolved, msg-problem, msg-rejected, msg-note
 *   permission:   permission-dialog, permission-summary, permission-allow, permission-always,
 *                 permission-suggestion, permission-deny, permission-deny-message,
 *                 permission-deny-interrupt
 *   composer:     prompt-input, prompt-send
 */
import type { GatewayClient } from '../client/index.js'
import { replaceChildren } from './dom.js'
import { ConsoleApp } from './console-app.js'
import { clientFor, forgetToken, keepToken, signInError, signInView, signInWith, storedToken, takeTokenFromAddress } from './signin.js'
import { TokenRenewal } from './token-renewal.js'
import { TokenShare } from './token-share.js'

const root = document.getElementById('app')
if (root === null) throw new Error('index.html has no #app')

let app: ConsoleApp | null = null

// Before a connection's JWT ends it: the person is asked for a newer token (the typed client's refreshToken).
const renewal = new TokenRenewal({ current: storedToken, keep: keepToken })
const refreshToken = (): Promise<string> => renewal.ask()

// Another tab signed out: so does this one.
const share = new TokenShare(storedToken, () => {
  if (app === null) return
  app.close()
  forgetToken()
  signIn(null)
})

function signedIn (client: GatewayClient): void {
  renewal.watch(client)
  app = new ConsoleApp(client, (notice) => {
    app = null
    forgetToken()
    // "Sign out" signs out every tab; a token refused here (notice) is this tab's: another may hold a newer one.
    if (notice === null) share.signOut()
    signIn(notice)
  })
  replaceChildren(root as HTMLElement, app.element)
}

function signIn (notice: string | null): void {
  app = null
  renewal.close()
  replaceChildren(root as HTMLElement, signInView(signedIn, notice, refreshToken))
}

/** A token from the address, this tab, or another open tab (checked when it is new here); else the sign-in form. */
async function start (): Promise<void> {
  const handedOver = takeTokenFromAddress()
  if (handedOver !== null) return signedIn(await signInWith(handedOver, refreshToken))
  const token = storedToken()
  if (token !== null) return signedIn(clientFor(token, refreshToken))
  const shared = await share.ask()
  if (shared !== null) return signedIn(await signInWith(shared, refreshToken))
  signIn(null)
}

// A `#token=` link opened in this tab while it runs (pasted in its address bar: no reload) is handed over as at
// start, so the token does not stay in the address, the history or a bookmark. A refused one leaves the tab as it was.
window.addEventListener('hashchange', () => {
  const handedOver = takeTokenFromAddress()
  if (handedOver === null) return
  signInWith(handedOver, refreshToken).then((client) => {
    app?.close()
    renewal.close() // a banner asking about the old token's end is no longer true
    signedIn(client)
  }, (err: unknown) => {
    if (app === null) signIn(signInError(err))
  })
})

start().catch((err: unknown) => { signIn(signInError(err)) })
