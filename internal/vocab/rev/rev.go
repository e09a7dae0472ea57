// Package rev prints commit ids the way people read them: a short prefix
// of the SHA, the same length on every surface that shows it.
package rev

// ShortLen is the prefix a person reads (git's default abbreviation):
// check runs, comments, pages and CLI tables.
const ShortLen = 7

// LogLen is the prefix logs and error messages carry: long enough to stay
// unique in a large repository's history.
const LogLen = 12

// Short is the first ShortLen characters of sha, or sha when shorter.
func Short(sha string) string { return Prefix(sha, ShortLen) }

// Log is the first LogLen characters of sha, or sha when shorter.
func Log(sha string) string { return Prefix(sha, LogLen) }

// Prefix is the first n characters of sha, or sha when shorter.
func Prefix(sha string, n int) string { return sha[:min(len(sha), n)] }
