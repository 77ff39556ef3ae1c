// Package redact replaces known secret values in byte streams with
// [REDACTED:NAME]. It is plain data: no network, no system calls.
//
// # What it catches
//
// For each secret value: the raw bytes; lower- and upper-case hex; standard
// and URL-safe base64 in all three alignments (the value starting 0, 1 or 2
// bytes into a 3-byte group of a longer encoded stream), as the characters
// that depend on the value alone, and with the last partial character and
// padding when the stream ends with the value; percent-encoding as
// url.QueryEscape and url.PathEscape write it (and with lower-case hex
// digits); and the value escaped inside a JSON string as encoding/json
// writes it, with and without HTML escaping, and as writers that escape
// more of what JSON needs no escape for write it: each set of the
// characters / + = < > & ' ` that it holds (the writers' own sets only,
// for a value with more than four of them) escaped as \u00XX in lower- or
// upper-case hex, / as \/ too (PHP's json_encode, .NET's System.Text.Json,
// Gson); the base64 and percent forms also with each of / + = escaped
// that way (a Basic credential echoed through such a writer); and a value
// with characters past ASCII as writers of ASCII only write it (each as
// \uXXXX, Python's json.dumps; with .NET's set and " too). Line breaks (CR, LF) are
// skipped while matching, so a form wrapped over lines — MIME base64 as
// base64(1) writes it every 76 columns, PEM every 64 — is caught, and so is
// a value that holds breaks itself, however it is rewrapped; the
// replacement covers the form from its first byte to its last, breaks
// inside it included. Where forms overlap, the leftmost match wins, then
// the longest.
//
// Redactor.Bytes redacts a buffer. Redactor.Writer redacts a stream split
// into any writes: it holds back at most the longest form less one byte
// (not counting line breaks), so
// a value straddling writes is still caught, and its output equals Bytes of
// the whole stream. Matching is one Aho-Corasick automaton over all forms,
// linear in the input.
//
// Runs, apart from Redactor, catches what a host does to a value it
// stores or quotes: any run of the value's raw bytes that holds at least a
// quarter of its secret bytes, or 16 (a value cut short, without its
// start, a slice of its middle), anywhere in the text.
//
// # What it cannot catch
//
//   - A value split across separate messages or streams (a Writer flushed
//     between the parts, or parts redacted separately): by value it cannot
//     be recognised. Within one JSON message, Redactor.JSON does catch a
//     value split over string values that a reader joins in order (the
//     text items of a tool result, whatever lies between them, fields of
//     its structuredContent), but not one split over member names, over
//     values read out of order or with another value between them (but
//     for text items), or joined with a separator (a space or line break between the parts is
//     caught only as a line break).
//   - Other encodings and transformations: base32, compression, encryption,
//     reversal, case changes other than hex, base64 of hex, partial
//     escapes, a JSON string escaped with \u for letters and digits,
//     percent-encoding of characters that need none. (Bytes does not see
//     through nested escapes; Redactor.JSON does: it also redacts each
//     escaped JSON string of a message decoded, up to four levels deep.)
//   - A few bits of the value may remain next to a base64 replacement (the
//     characters shared with neighbouring bytes).
//   - Values shorter than MinValueLen (8) bytes are refused, since they hit
//     ordinary text, unless Options.AllowShort forces them.
package redact
