/**
 * The console's only way to build DOM: elements from a tag, properties and
 * children, where every string becomes a text node (`revealed` names the
 * characters that would not be drawn, and draws text in the order it is
 * written whatever its scripts, for what a person approves). Nothing a session prints
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

/**
 * Letters of the scripts written right to left. Among other text, the bidi algorithm draws such a letter's
 * neighbours around it (digits, words after it moved before it: `rm -rf /tmp/שלום 1` reads as
 * `rm -rf /tmp/1 שלום`); a run of them is drawn apart, on its own (a word still reads right to left).
 */
const RTL_RUN = /[\p{Script=Hebrew}\p{Script=Arabic}\p{Script=Syriac}\p{Script=Thaana}\p{Script=Nko}\p{Script=Samaritan}\p{Script=Mandaic}\p{Script=Adlam}\p{Script=Hanifi_Rohingya}\p{Script=Yezidi}\p{Script=Mende_Kikakui}\p{Script=Imperial_Aramaic}\p{Script=Phoenician}\p{Script=Kharoshthi}\p{Script=Avestan}\p{Script=Nabataean}\p{Script=Palmyrene}\p{Script=Manichaean}\p{Script=Old_South_Arabian}\p{Script=Old_North_Arabian}\p{Script=Inscriptional_Parthian}\p{Script=Inscriptional_Pahlavi}\p{Script=Psalter_Pahlavi}\p{Script=Old_Hungarian}\p{Script=Old_Turkic}\p{Script=Sogdian}\p{Script=Old_Sogdian}\p{Script=Elymaic}\p{Script=Chorasmian}\p{Script=Hatran}\p{Script=Lydian}\p{Script=Cypriot}]/u
const RTL_RUNS = new RegExp(`(?:${RTL_RUN.source})(?:${RTL_RUN.source}|\\p{M})*`, 'gu')

/**
 * `text` as children where each such character is named (`U+202E`, marked) instead of drawn. By default
 * (`literal`: a command, a path, a name) it is also drawn in the order it is written, whatever letters it
 * holds: one span, left to right, its bidi isolated from around it and overridden within (styles.css
 * `.literal`), each run of right-to-left letters in it drawn apart (`.rtl-run`). Prose (a description in
 * the model's words) keeps the usual bidi: `literal` false.
 */
export function revealed (text: string, literal = true): Child[] {
  const out: Child[] = []
  let from = 0
  for (const match of text.matchAll(HIDDEN)) {
    const code = (match[0].codePointAt(0) ?? 0).toString(16).toUpperCase().padStart(4, '0')
    out.push(...(literal ? runs(text.slice(from, match.index)) : [text.slice(from, match.index)]),
      h('span', { class: 'hidden-char', attrs: { title: 'A character that is not drawn' } }, `U+${code}`))
    from = match.index + match[0].length
  }
  out.push(...(literal ? runs(text.slice(from)) : [text.slice(from)]))
  const children = out.filter((child) => child !== '')
  return literal && children.length > 0 ? [h('span', { class: 'literal' }, ...children)] : children
}

/** `text` with each run of right-to-left letters in an isolate of its own. */
function runs (text: string): Child[] {
  const out: Child[] = []
  let from = 0
  for (const match of text.matchAll(RTL_RUNS)) {
    out.push(text.slice(from, match.index), h('span', { class: 'rtl-run', attrs: { dir: 'rtl' } }, match[0]))
    from = match.index + match[0].length
  }
  out.push(text.slice(from))
  return out
}

/** `text` cut to `max` characters, saying how much was left out. */
export function clip (text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max)}\n… (${text.length - max} more characters)`
}
