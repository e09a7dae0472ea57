// Package templates embeds the text/template files perfgate renders check
// runs and PR comments from. They live at the repository's top level so a
// team can read and review them like any other user-facing text.
package templates

import "embed"

// FS holds every *.md.tmpl file in this directory.
//
//go:embed *.md.tmpl
var FS embed.FS
