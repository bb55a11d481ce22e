/**
 * The documentation each setting carries beside its rule: README's settings
 * table is generated from this registry (scripts/settings-table.ts), so a
 * setting is documented where it is defined and the two cannot drift.
 */
import { z } from 'zod'

/** What README's table says of one variable. */
export interface SettingDoc {
  /** The "meaning" column. */
  about: string
  /** The value used when the variable is unset or empty, as written in the environment. */
  default?: string
  /** For a variable with no fixed default: what leaving it unset means. */
  unset?: string
  /** A secret that may come from the file named by `<NAME>_FILE` instead. */
  fromFile?: boolean
}

export const settingDocs = z.registry<SettingDoc>()

/** `schema`, documented, with `fallback` (the value as the environment would spell it) when unset. */
export function defaulted<S extends z.ZodType> (schema: S, fallback: z.input<S> & (string | number), about: string) {
  return documented(schema.prefault(fallback), { about, default: String(fallback) })
}

/** `schema`, documented, undefined when unset (what that means is `unset`). */
export function optional<S extends z.ZodType> (schema: S, unset: string, about: string, fromFile = false) {
  return documented(schema.optional(), { about, unset, ...(fromFile ? { fromFile } : {}) })
}

/** Records `doc` for `schema` in settingDocs, where the README table and its test read it. */
export function documented<S extends z.ZodType> (schema: S, doc: SettingDoc): S {
  settingDocs.add(schema, doc)
  return schema
}
