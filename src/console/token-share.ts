/**
 * Tabs of this console share the token while one of them is open: a tab
 * opened without one (a session link opened in a new tab) asks the others
 * over a BroadcastChannel, which only pages of this origin can join, and
 * signing out in one tab signs out every tab. The token still lives only in
 * the open tabs' sessionStorage: when the last tab closes it is gone.
 */

const CHANNEL = 'claude-gateway.console'

type Message = { type: 'ask' } | { type: 'token', token: string } | { type: 'signout' }

export class TokenShare {
  readonly #channel: BroadcastChannel | null

  /**
   * `current` says this tab's token (answered to tabs that ask);
   * `onSignOut` runs when another tab signs out.
   */
  constructor (private readonly current: () => string | null, private readonly onSignOut: () => void) {
    this.#channel = typeof BroadcastChannel === 'function' ? new BroadcastChannel(CHANNEL) : null
    this.#channel?.addEventListener('message', (event: MessageEvent<Message>) => {
      const message = event.data
      if (message.type === 'ask') {
        const token = this.current()
        if (token !== null) this.#post({ type: 'token', token })
      } else if (message.type === 'signout') {
        this.onSignOut()
      }
    })
  }

  /** The token of another open tab, or null when none answers within `waitMs`. */
  ask (waitMs = 300): Promise<string | null> {
    const channel = this.#channel
    if (channel === null) return Promise.resolve(null)
    return new Promise((resolve) => {
      const done = (token: string | null): void => {
        clearTimeout(timer)
        channel.removeEventListener('message', listen)
        resolve(token)
      }
      const listen = (event: MessageEvent<Message>): void => {
        if (event.data.type === 'token' && typeof event.data.token === 'string') done(event.data.token)
      }
      const timer = setTimeout(() => { done(null) }, waitMs)
      channel.addEventListener('message', listen)
      this.#post({ type: 'ask' })
    })
  }

  /** Tells the other tabs to sign out too. */
  signOut (): void {
    this.#post({ type: 'signout' })
  }

  #post (message: Message): void {
    this.#channel?.postMessage(message)
  }
}
