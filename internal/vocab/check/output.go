package check

import "unicode/utf8"

// Output is a check run's title and markdown body.
type Output struct {
	Title   string
	Summary string
	Text    string
	// Annotations mark lines of the pull request's files. GitHub appends
	// a request's annotations to those the run already has, so a step
	// sends them once, with the verdict they belong to.
	Annotations []Annotation
}

// Annotation is one line of a file, marked on the check run.
type Annotation struct {
	Path    string `json:"path"`
	Line    int    `json:"line"`
	Level   string `json:"level"` // notice, warning or failure
	Title   string `json:"title,omitempty"`
	Message string `json:"message"`
}

// MaxAnnotations is GitHub's limit on output.annotations per request.
const MaxAnnotations = 50

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
