/**
 * The console's only way to build DOM: elements from a tag, properties and
 * children, where every string becomes a text node (`revealed` names the
 * characters that would not be drawn, for what a person approves). Nothing a session prints
 * is ever parsed as HTML (no innerHTML anywhere in src/console), and the page's
 * Content-Security-Policy forbids inline script besides.
 */

export type Child = Node | string | number | null | undefined | false

export interface Props {
  /** CSS classes, space separated. */
  class?: string
  /** `data-testid`: the stable names a browser test drives (main.ts lists them). */
  testid?: string
  /** Other attributes (`aria-*`, `type`, `for`, …); null or false leaves one out, true sets it empty. */
  attrs?: Record<string, string | number | boolean | null | undefined>
  /** Event listeners by event name. */
  on?: { [K in keyof HTMLElementEventMap]?: (event: HTMLElementEventMap[K]) => void }
}

/** `document.createElement(tag)` with `props` and `children` (strings as text). */
export function h<K extends keyof HTMLElementTagNameMap> (tag: K, props: Props = {}, ...children: Child[]): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag)
  if (props.class !== undefined) el.className = props.class
  if (props.testid !== undefined) el.dataset.testid = props.testid
  for (const [name, value] of Object.entries(props.attrs ?? {})) {
    if (value === null || value === undefined || value === false) continue
    el.setAttribute(name, value === true ? '' : String(value))
  }
  for (const [name, listener] of Object.entries(props.on ?? {})) {
    el.addEventListener(name, listener as EventListener)
  }
  append(el, ...children)
  return el
}

/** Appends children, strings and numbers as text nodes. */
export function append (parent: Node, ...children: Child[]): void {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue
    parent.appendChild(typeof child === 'string' || typeof child === 'number' ? document.createTextNode(String(child)) : child)
  }
}

/** Replaces every child of `parent`. */
export function replaceChildren (parent: Element, ...children: Child[]): void {
  parent.replaceChildren()
  append(parent, ...children)
}

/** "12 s", "3 min", "2 h", "4 d": how long ago (or how long) `ms` is. */
export function duration (ms: number): string {
  const s = Math.max(0, Math.round(ms / 1000))
  if (s < 60) return `${s} s`
  if (s < 3600) return `${Math.round(s / 60)} min`
  if (s < 86_400) return `${Math.round(s / 3600)} h`
  return `${Math.round(s / 86_400)} d`
}

/** The first 8 characters of an id: enough to tell sessions apart on screen. */
export function shortId (id: string): string {
  return id.slice(0, 8)
}

/**
 * Characters that draw nothing or move the text around them: controls (but tab and newline), bidi
 * embeddings, overrides and isolates, zero-width and tag characters, separators other than a newline,
 * variation selectors and blank fillers. Drawn raw, a command holding them reads as something other than
 * what runs (Trojan Source: a command drawn as if commented out).
 */
const HIDDEN = /(?![\t\n])[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\uFE00-\uFE0F\u{E0100}-\u{E01EF}\u115F\u1160\u3164\uFFA0]/gu

/** `text` as children where each such character is named (`U+202E`, marked) instead of drawn. */
export function revealed (text: string): Child[] {
  const out: Child[] = []
  let from = 0
  for (const match of text.matchAll(HIDDEN)) {
    const code = (match[0].codePointAt(0) ?? 0).toString(16).toUpperCase().padStart(4, '0')
    out.push(text.slice(from, match.index), h('span', { class: 'hidden-char', attrs: { title: 'A character that is not drawn' } }, `U+${code}`))
    from = match.index + match[0].length
  }
  out.push(text.slice(from))
  return out.filter((child) => child !== '')
}

/** `text` cut to `max` characters, saying how much was left out. */
export function clip (text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max)}\n… (${text.length - max} more characters)`
}
