package check

import "unicode/utf8"

// Output is a check run's title and markdown body.
type Output struct {
	Title   string
	Summary string
	Text    string
}

// MaxOutput is GitHub's limit on output.summary and output.text, in
// characters.
const MaxOutput = 65535

// DocsURL is where a "not configured" check points.
const DocsURL = "https://github.com/perfgate/perfgate#repository-configuration-githubperfgateyml"

// Truncate keeps s within max characters, saying so at the end.
func Truncate(s string, max int) string {
	if utf8.RuneCountInString(s) <= max {
		return s
	}
	const note = "\n\n… (truncated)"
	r := []rune(s)
	return string(r[:max-utf8.RuneCountInString(note)]) + note
}
